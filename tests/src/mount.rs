//! Files laid out the way kubelet mounts a Secret or ConfigMap volume, for tests of what a
//! server does when such a volume is updated.

use std::path::PathBuf;

/// A directory laid out the way kubelet mounts a Secret or ConfigMap volume: each file name is a
/// symlink through `..data`, a symlink to a timestamped directory holding the contents; an update
/// writes a new directory and renames a fresh symlink over `..data` (one atomic step), then
/// removes the old directory.
pub struct SecretMount {
    dir: tempfile::TempDir,
    generation: u32,
}

impl SecretMount {
    /// Mounts `files` (name, contents).
    pub fn new(files: &[(&str, &[u8])]) -> Self {
        let mut mount = Self {
            dir: tempfile::tempdir().expect("tempdir"),
            generation: 0,
        };
        mount.update(files);
        for (name, _) in files {
            std::os::unix::fs::symlink(format!("..data/{name}"), mount.path(name))
                .expect("symlink");
        }
        mount
    }

    /// The path a container would open (`<mount>/<name>`).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Replaces the contents the way kubelet's atomic writer does.
    pub fn update(&mut self, files: &[(&str, &[u8])]) {
        let old = format!("..gen_{}", self.generation);
        self.generation += 1;
        let new = format!("..gen_{}", self.generation);
        std::fs::create_dir(self.path(&new)).expect("mkdir");
        for (name, contents) in files {
            std::fs::write(self.path(&new).join(name), contents).expect("write");
        }
        std::os::unix::fs::symlink(&new, self.path("..data_tmp")).expect("symlink");
        std::fs::rename(self.path("..data_tmp"), self.path("..data")).expect("rename");
        let _ = std::fs::remove_dir_all(self.path(&old));
    }
}

//! Restarting a server on the same gRPC port and data directory (a crash and a comeback, as the
//! clients see them), and starting one on a port chosen before it runs (a server that comes up
//! after its clients).

use crate::server::Server;
use std::path::Path;

/// `ADDR` of a loopback port that was free a moment ago (for a server started later).
pub fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").to_string()
}

impl Server {
    /// Starts a server on `data_dir` whose gRPC port is `addr` (`ADDR` or `http://ADDR`).
    pub fn start_at(data_dir: &Path, addr: &str, extra: &[&str]) -> Server {
        let addr = addr.trim_start_matches("http://");
        let mut flags = vec!["--listen", addr];
        flags.extend_from_slice(extra);
        Self::spawn(data_dir, &flags, &[], None)
    }

    /// `kill -9` (when running), then starts the server again on the same gRPC port and data
    /// directory (with `extra` flags), keeping the temporary directory `start` made.
    pub fn restart(&mut self, extra: &[&str]) {
        self.kill9();
        let mut next = Self::start_at(&self.data_dir, &self.grpc, extra);
        next._dir = self._dir.take();
        *self = next;
    }

    /// True while the process runs.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }
}

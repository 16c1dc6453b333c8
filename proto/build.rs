//! Generates the oncekey.v1 Rust code with a pure-Rust protobuf compiler (protox), so a fresh machine
//! builds with cargo alone, and exports the file descriptor set for gRPC server reflection.

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "oncekey/v1/ledger.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["."])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("oncekey_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .emit_rerun_if_changed(false)
        .compile_fds(fds)?;
    Ok(())
}

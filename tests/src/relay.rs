//! A plain TCP relay in front of a node, run on threads of the test process: it forwards bytes
//! both ways without looking at them (so TLS passes through), and can cut every connection it
//! relays at once, as a network failure would. For a single node the driver needs no address
//! translation: it learns the node's address from `system.local`'s `rpc_address` (127.0.0.1)
//! with the port of its contact point, i.e. this relay, so every connection passes here.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// A running relay; it stops accepting when dropped (connections it relays go on until cut).
pub struct Relay {
    /// Where it listens.
    pub addr: SocketAddr,
    open: Arc<Mutex<Vec<TcpStream>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Relay {
    /// Listens on a free port of 127.0.0.1 and relays to `upstream` (`host:port`).
    pub fn start(upstream: &str) -> Relay {
        Self::start_on("127.0.0.1:0", upstream)
    }

    /// Listens on `listen` and relays every connection to `upstream`.
    pub fn start_on(listen: &str, upstream: &str) -> Relay {
        let listener = TcpListener::bind(listen).unwrap_or_else(|e| panic!("bind {listen}: {e}"));
        let addr = listener.local_addr().expect("local addr");
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let stop: Arc<std::sync::atomic::AtomicBool> = Arc::default();
        let upstream = upstream.to_owned();
        let (conns, stopped) = (open.clone(), stop.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stopped.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(&upstream) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                let mut registry = conns.lock().unwrap();
                for stream in [&client, &server] {
                    if let Ok(clone) = stream.try_clone() {
                        registry.push(clone);
                    }
                }
                drop(registry);
                pipe(&client, &server);
                pipe(&server, &client);
            }
        });
        Relay { addr, open, stop }
    }

    /// `127.0.0.1:PORT`, for `--cql-nodes`.
    pub fn contact_point(&self) -> String {
        self.addr.to_string()
    }

    /// Closes every connection relayed so far, both ways (new ones are relayed as before).
    pub fn cut_all(&self) {
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        // Wake the accept loop so it sees the stop.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Copies `from` into `to` on a thread of its own until either side closes.
fn pipe(from: &TcpStream, to: &TcpStream) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}

//! A Unix-socket proxy in front of the real Docker daemon that drops chosen connections:
//! a daemon that is briefly unreachable, as the harness sees it.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Which connections the proxy drops (counting from 0), after reading the request head
/// and before the daemon sees anything.
#[derive(Clone)]
pub enum Drop {
    /// Connection 0, and every `n`-th one after.
    EveryNth(usize),
    /// Connection 0, then every connection for `window` after connection `from`.
    Outage { from: usize, window: Duration },
}

pub struct FlakyProxy {
    pub socket: PathBuf,
    pub dropped: Arc<AtomicUsize>,
    pub forwarded: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl FlakyProxy {
    pub fn start(dir: &Path, upstream: &str, drop: Drop) -> FlakyProxy {
        let socket = dir.join("flaky-docker.sock");
        let listener = UnixListener::bind(&socket).expect("bind proxy socket");
        listener.set_nonblocking(true).unwrap();
        let dropped = Arc::new(AtomicUsize::new(0));
        let forwarded = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (d, f, s) = (dropped.clone(), forwarded.clone(), stop.clone());
        let upstream = upstream.to_string();
        std::thread::spawn(move || {
            let mut n = 0usize;
            let mut outage_started: Option<Instant> = None;
            while !s.load(Ordering::SeqCst) {
                let client = match listener.accept() {
                    Ok((c, _)) => c,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(2));
                        continue;
                    }
                };
                let _ = client.set_nonblocking(false);
                let drop_it = match &drop {
                    Drop::EveryNth(k) => n.is_multiple_of(*k),
                    Drop::Outage { from, window } => {
                        if n == *from {
                            outage_started = Some(Instant::now());
                        }
                        n == 0 || outage_started.is_some_and(|t| t.elapsed() < *window)
                    }
                };
                n += 1;
                if drop_it {
                    d.fetch_add(1, Ordering::SeqCst);
                    std::thread::spawn(move || read_head_and_close(client));
                } else {
                    f.fetch_add(1, Ordering::SeqCst);
                    let upstream = upstream.clone();
                    std::thread::spawn(move || forward(client, &upstream));
                }
            }
        });
        FlakyProxy {
            socket,
            dropped,
            forwarded,
            stop,
        }
    }

    pub fn docker_host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }
}

impl std::ops::Drop for FlakyProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Reads until the end of the request head (or a short timeout), then closes: the client
/// has sent its request and gets no answer.
fn read_head_and_close(mut client: UnixStream) {
    let _ = client.set_read_timeout(Some(Duration::from_millis(500)));
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        match client.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    let _ = client.shutdown(std::net::Shutdown::Both);
}

fn forward(client: UnixStream, upstream: &str) {
    let Ok(server) = UnixStream::connect(upstream) else {
        return;
    };
    let (Ok(mut c_read), Ok(mut s_write)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut c_read, &mut s_write);
        let _ = s_write.shutdown(std::net::Shutdown::Write);
    });
    let (mut s_read, mut c_write) = (server, client);
    let _ = std::io::copy(&mut s_read, &mut c_write);
    let _ = c_write.flush();
    let _ = c_write.shutdown(std::net::Shutdown::Write);
    let _ = up.join();
}

//! `harness-supervisor relay PORT SOCKET`: the model gateway's door inside an agent's
//! sandbox. The agent's container has no network (its sandbox a loopback of its own); the
//! CLIs speak HTTP to a TCP address, so this listens on 127.0.0.1:PORT in the sandbox's
//! network namespace and carries each connection, byte for byte, to the gateway's unix
//! socket (bind-mounted from the host). It holds nothing: the token the agent sends is all
//! the gateway accepts, and the provider's key never leaves the host.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;

/// Binds, then serves in a child of its own (the parent exits 0 once the port listens, so
/// `relay ... && agent` never races the agent's first request).
pub fn main(args: &[String]) -> i32 {
    let (Some(port), Some(socket)) = (args.first(), args.get(1)) else {
        eprintln!("harness-supervisor relay: needs PORT SOCKET");
        return 2;
    };
    let Ok(port) = port.parse::<u16>() else {
        eprintln!("harness-supervisor relay: {port:?} is not a port");
        return 2;
    };
    let listener = match TcpListener::bind(("127.0.0.1", port)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("harness-supervisor relay: cannot listen on 127.0.0.1:{port}: {e}");
            return 1;
        }
    };
    // SAFETY: fork in a single-threaded process; the child only uses std from here on.
    match unsafe { libc::fork() } {
        -1 => {
            eprintln!("harness-supervisor relay: cannot fork");
            1
        }
        0 => {
            for conn in listener.incoming().flatten() {
                let socket = socket.clone();
                std::thread::spawn(move || carry(conn, &socket));
            }
            0
        }
        _ => 0,
    }
}

fn carry(tcp: TcpStream, socket: &str) {
    let Ok(unix) = UnixStream::connect(socket) else {
        let _ = (&tcp).write_all(
            b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 30\r\nconnection: close\r\n\r\nthe harness's gateway is gone\n",
        );
        return;
    };
    let (Ok(tcp_back), Ok(unix_back)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        pump(&tcp, &unix);
        let _ = unix.shutdown(Shutdown::Write);
    });
    pump(&unix_back, &tcp_back);
    let _ = tcp_back.shutdown(Shutdown::Write);
    let _ = up.join();
}

fn pump(mut from: impl Read, mut to: impl Write) {
    let mut buf = [0u8; 16384];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

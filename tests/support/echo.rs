//! A tiny TCP server for background-job tests: this test binary re-executed with
//! `CRUSH_TEST_ECHO_SERVER=DIR` binds 127.0.0.1, writes its port to `DIR/port` and its pid to
//! `DIR/pid`, and answers each line of each connection with `pong LINE`, until killed.

use std::io::{BufRead, BufReader, Write};

pub(crate) const ECHO_ENV: &str = "CRUSH_TEST_ECHO_SERVER";

fn echo_main(dir: &std::path::Path) -> ! {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::fs::write(dir.join("pid"), std::process::id().to_string()).expect("pid file");
    // Written last, atomically: a reader that sees the port finds the server listening.
    std::fs::write(dir.join("port.tmp"), port.to_string()).expect("port file");
    std::fs::rename(dir.join("port.tmp"), dir.join("port")).expect("port file");
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        std::thread::spawn(move || {
            let mut w = conn.try_clone().expect("clone");
            for line in BufReader::new(conn).lines() {
                let Ok(line) = line else { break };
                if writeln!(w, "pong {line}").is_err() {
                    break;
                }
            }
        });
    }
    std::process::exit(0)
}

/// Runs before `main`: in echo mode this process is the server and nothing else.
extern "C" fn echo_mode() {
    if let Some(dir) = std::env::var_os(ECHO_ENV) {
        echo_main(std::path::Path::new(&dir));
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static ECHO_MODE: extern "C" fn() = echo_mode;

//! The job server's protocol, over the socket crush and its job server share.
//!
//! Crush sends requests, each one frame: a 4-byte little-endian length, then that many bytes of
//! NUL-terminated fields. The descriptors a request passes (a spawn's stdout and stderr, and
//! its stdin when there is a third) travel as `SCM_RIGHTS` with the frame's first bytes.
//!
//! - `spawn ID ARGC ARG... CWD SANDBOXC SANDBOX... NAME=VALUE...`: run ARGV in CWD with exactly
//!   that environment, confined by the sandbox policy of the SANDBOXC fields when there are any
//!   (`sandbox::Policy::encode`).
//! - `signal ID SIG`: signal job ID's process group, if any of it is left.
//!
//! The server answers with lines: `started ID PID`, `error ID MESSAGE` (it could not be
//! started), `exit ID CODE` or `signal ID SIG` (how its command ended), and `gone ID` (no
//! process of its group is left).

use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;

/// A frame longer than this is refused (more than the kernel lets one exec carry).
const MAX_FRAME: usize = 64 << 20;
/// At most this many descriptors come with one request.
const MAX_FDS: usize = 4;

/// What crush asks of the job server.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Request {
    Spawn {
        id: u64,
        argv: Vec<OsString>,
        cwd: OsString,
        /// The sandbox policy's fields; empty: none.
        sandbox: Vec<OsString>,
        env: Vec<(OsString, OsString)>,
    },
    Signal {
        id: u64,
        sig: i32,
    },
}

/// What the job server reports about a job.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Reply {
    Started(i32),
    Error(String),
    Exit(i32),
    Signal(i32),
    Gone,
}

impl Reply {
    /// The line that carries this reply for job `id`.
    pub(super) fn line(&self, id: u64) -> String {
        match self {
            Reply::Started(pid) => format!("started {id} {pid}\n"),
            // One line: the message may not break the framing.
            Reply::Error(m) => format!("error {id} {}\n", m.replace('\n', " ")),
            Reply::Exit(code) => format!("exit {id} {code}\n"),
            Reply::Signal(sig) => format!("signal {id} {sig}\n"),
            Reply::Gone => format!("gone {id}\n"),
        }
    }

    /// Reads one reply line; None when it is not one.
    pub(super) fn parse(line: &str) -> Option<(u64, Reply)> {
        let mut parts = line.trim_end_matches('\n').splitn(3, ' ');
        let kind = parts.next()?;
        let id = parts.next()?.parse().ok()?;
        let rest = parts.next();
        let num = || rest.and_then(|r| r.parse::<i32>().ok());
        let reply = match kind {
            "started" => Reply::Started(num()?),
            "error" => Reply::Error(rest.unwrap_or("").to_string()),
            "exit" => Reply::Exit(num()?),
            "signal" => Reply::Signal(num()?),
            "gone" => Reply::Gone,
            _ => return None,
        };
        Some((id, reply))
    }
}

fn push_field(out: &mut Vec<u8>, field: &[u8]) {
    out.extend_from_slice(field);
    out.push(0);
}

impl Request {
    /// The frame: length, then the fields.
    fn encode(&self) -> Vec<u8> {
        let mut p = vec![0u8; 4];
        match self {
            Request::Spawn {
                id,
                argv,
                cwd,
                sandbox,
                env,
            } => {
                push_field(&mut p, b"spawn");
                push_field(&mut p, id.to_string().as_bytes());
                push_field(&mut p, argv.len().to_string().as_bytes());
                for a in argv {
                    push_field(&mut p, a.as_bytes());
                }
                push_field(&mut p, cwd.as_bytes());
                push_field(&mut p, sandbox.len().to_string().as_bytes());
                for f in sandbox {
                    push_field(&mut p, f.as_bytes());
                }
                for (k, v) in env {
                    let mut kv = k.as_bytes().to_vec();
                    kv.push(b'=');
                    kv.extend_from_slice(v.as_bytes());
                    push_field(&mut p, &kv);
                }
            }
            Request::Signal { id, sig } => {
                push_field(&mut p, b"signal");
                push_field(&mut p, id.to_string().as_bytes());
                push_field(&mut p, sig.to_string().as_bytes());
            }
        }
        let len = (p.len() - 4) as u32;
        p[..4].copy_from_slice(&len.to_le_bytes());
        p
    }

    fn decode(payload: &[u8]) -> Option<Request> {
        let payload = payload.strip_suffix(&[0])?;
        let mut fields = payload.split(|&b| b == 0);
        let kind = fields.next()?;
        let num = |f: Option<&[u8]>| std::str::from_utf8(f?).ok()?.parse::<u64>().ok();
        let id = num(fields.next())?;
        match kind {
            b"spawn" => {
                let argc = num(fields.next())? as usize;
                let mut argv = Vec::new();
                for _ in 0..argc {
                    argv.push(OsString::from_vec(fields.next()?.to_vec()));
                }
                let cwd = OsString::from_vec(fields.next()?.to_vec());
                let n = num(fields.next())? as usize;
                let mut sandbox = Vec::new();
                for _ in 0..n {
                    sandbox.push(OsString::from_vec(fields.next()?.to_vec()));
                }
                // As the C library reads an environment: the name ends at the first `=` after
                // its first byte.
                let env = fields
                    .filter(|f| !f.is_empty())
                    .map(|f| match f[1..].iter().position(|&b| b == b'=') {
                        Some(i) => (
                            OsStr::from_bytes(&f[..i + 1]).to_owned(),
                            OsStr::from_bytes(&f[i + 2..]).to_owned(),
                        ),
                        None => (OsStr::from_bytes(f).to_owned(), OsString::new()),
                    })
                    .collect();
                Some(Request::Spawn {
                    id,
                    argv,
                    cwd,
                    sandbox,
                    env,
                })
            }
            b"signal" => {
                let sig = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
                Some(Request::Signal { id, sig })
            }
            _ => None,
        }
    }
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

/// Sends `req` on `sock` with `fds` attached. Never raises SIGPIPE: a closed peer is `Err`.
pub(super) fn send(sock: &UnixStream, req: &Request, fds: &[RawFd]) -> io::Result<()> {
    let frame = req.encode();
    let fd = sock.as_raw_fd();
    let mut iov = libc::iovec {
        iov_base: frame.as_ptr() as *mut libc::c_void,
        iov_len: frame.len(),
    };
    let data_len = std::mem::size_of_val(fds) as u32;
    // u64s: the control buffer must be aligned for `cmsghdr`.
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(data_len) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: a zeroed msghdr is valid; the pointers set below outlive the sendmsg call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer holds one header and `fds` (CMSG_SPACE above); the
        // header pointer is into it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(data_len) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(cmsg),
                data_len as usize,
            );
        }
    }
    let mut sent = loop {
        // SAFETY: msg and what it points to are valid for the call.
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            break n as usize;
        }
        let e = last_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    while sent < frame.len() {
        let rest = &frame[sent..];
        // SAFETY: sends from a live slice.
        let n = unsafe { libc::send(fd, rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = last_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        sent += n as usize;
    }
    Ok(())
}

/// Receives one request and the descriptors that came with it (close-on-exec). None at the end
/// of the stream (crush is gone); Err on a broken or malformed frame.
pub(super) fn recv(sock: &UnixStream) -> io::Result<Option<(Request, Vec<OwnedFd>)>> {
    let fd = sock.as_raw_fd();
    let mut head = [0u8; 4];
    let mut iov = libc::iovec {
        iov_base: head.as_mut_ptr().cast(),
        iov_len: head.len(),
    };
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE((MAX_FDS * size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: a zeroed msghdr is valid; the pointers set below outlive the recvmsg call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    let n = loop {
        // SAFETY: msg and what it points to are valid for the call.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = last_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: walks the control messages the kernel wrote into `control`; each SCM_RIGHTS
    // entry holds descriptors now owned by this process.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                for i in 0..bytes / size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if n == 0 {
        return Ok(None);
    }
    let mut reader = sock;
    if n < head.len() {
        reader.read_exact(&mut head[n..])?;
    }
    let len = u32::from_le_bytes(head) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "frame too long"));
    }
    let mut payload = vec![0u8; len];
    reader.read_exact(&mut payload)?;
    match Request::decode(&payload) {
        Some(r) => Ok(Some((r, fds))),
        None => Err(io::Error::new(io::ErrorKind::InvalidData, "bad request")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn requests_and_their_descriptors_cross_the_socket() {
        let (a, b) = UnixStream::pair().unwrap();
        let spawn = Request::Spawn {
            id: 7,
            argv: vec!["sh".into(), "-c".into(), "echo a=b".into()],
            cwd: "/tmp".into(),
            sandbox: vec!["workspace-write".into(), "nonet".into(), "/p".into()],
            env: vec![
                ("A".into(), "1=2".into()),
                ("EMPTY".into(), "".into()),
                ("=C:".into(), "x".into()),
            ],
        };
        let (r, w) = std::io::pipe().unwrap();
        send(&a, &spawn, &[w.as_raw_fd()]).unwrap();
        drop(w);
        send(&a, &Request::Signal { id: 7, sig: 15 }, &[]).unwrap();
        let (got, fds) = recv(&b).unwrap().unwrap();
        assert_eq!(got, spawn);
        assert_eq!(fds.len(), 1);
        let mut passed = std::fs::File::from(fds.into_iter().next().unwrap());
        passed.write_all(b"through").unwrap();
        drop(passed);
        let mut text = String::new();
        (&r).read_to_string(&mut text).unwrap();
        assert_eq!(text, "through");
        let (got, fds) = recv(&b).unwrap().unwrap();
        assert_eq!((got, fds.len()), (Request::Signal { id: 7, sig: 15 }, 0));
        drop(a);
        assert!(recv(&b).unwrap().is_none());
    }

    #[test]
    fn replies_read_back_as_written() {
        for r in [
            Reply::Started(42),
            Reply::Error("cannot run x: no such file".into()),
            Reply::Exit(3),
            Reply::Signal(9),
            Reply::Gone,
        ] {
            let line = r.line(12);
            assert_eq!(Reply::parse(&line), Some((12, r)), "{line}");
        }
        assert_eq!(
            Reply::parse(&Reply::Error("a\nb".into()).line(1)),
            Some((1, Reply::Error("a b".into())))
        );
        assert_eq!(Reply::parse("bogus 1 2\n"), None);
    }
}

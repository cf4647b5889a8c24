//! The network cut's seccomp filter (crush(1) SECURITY, sandbox), a classic BPF program built
//! by hand before fork: sockets of any family but `AF_UNIX` cannot be made (no UDP, no raw
//! sockets, no netlink), nothing can connect, bind, listen or accept (so a Unix socket such as
//! Docker's is no way out either), `sendto` takes no address, and io_uring, which would do all
//! of that outside the filter's sight, cannot be set up. Every refusal is `EPERM`; a syscall of
//! another architecture (the 32-bit or x32 ABI) kills the process.

use std::io;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// Offsets in `struct seccomp_data`.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const fn off_arg_lo(i: u32) -> u32 {
    16 + 8 * i
}

const BPF_LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const BPF_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const BPF_JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const BPF_RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const RET_EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
const RET_KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

/// Syscalls refused outright.
const DENIED: [libc::c_long; 8] = [
    libc::SYS_connect,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_accept,
    libc::SYS_accept4,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The filter, ready to install.
#[derive(Debug)]
pub(super) struct Filter {
    prog: Vec<libc::sock_filter>,
}

impl Filter {
    pub(super) fn network_off() -> Filter {
        let mut p = vec![
            stmt(BPF_LD_W_ABS, OFF_ARCH),
            jump(BPF_JEQ_K, AUDIT_ARCH, 1, 0),
            stmt(BPF_RET_K, RET_KILL),
            stmt(BPF_LD_W_ABS, OFF_NR),
        ];
        if cfg!(target_arch = "x86_64") {
            // The x32 ABI's numbers have this bit set.
            p.push(jump(BPF_JGE_K, 0x4000_0000, 0, 1));
            p.push(stmt(BPF_RET_K, RET_KILL));
        }
        // Then: the denied list, socket, sendto, allow, and the three tails below. Jumps are
        // relative to the next instruction.
        let n = DENIED.len();
        // Index (from the first `jeq` of the list) of each tail.
        let allow = n + 2;
        let deny = allow + 1;
        let socket = deny + 1;
        let sendto = socket + 2;
        for (i, nr) in DENIED.iter().enumerate() {
            p.push(jump(BPF_JEQ_K, *nr as u32, (deny - i - 1) as u8, 0));
        }
        p.push(jump(
            BPF_JEQ_K,
            libc::SYS_socket as u32,
            (socket - n - 1) as u8,
            0,
        ));
        p.push(jump(
            BPF_JEQ_K,
            libc::SYS_sendto as u32,
            (sendto - n - 2) as u8,
            0,
        ));
        p.push(stmt(BPF_RET_K, RET_ALLOW)); // allow
        p.push(stmt(BPF_RET_K, RET_EPERM)); // deny
        // socket(domain, ...): only AF_UNIX.
        p.push(stmt(BPF_LD_W_ABS, off_arg_lo(0)));
        p.push(jump(BPF_JEQ_K, libc::AF_UNIX as u32, 4, 5)); // to the last allow, or the last deny
        // sendto(..., dest_addr, ...): only without an address (both halves of the pointer 0).
        p.push(stmt(BPF_LD_W_ABS, off_arg_lo(4)));
        p.push(jump(BPF_JEQ_K, 0, 0, 3));
        p.push(stmt(BPF_LD_W_ABS, off_arg_lo(4) + 4));
        p.push(jump(BPF_JEQ_K, 0, 0, 1));
        p.push(stmt(BPF_RET_K, RET_ALLOW));
        p.push(stmt(BPF_RET_K, RET_EPERM));
        Filter { prog: p }
    }

    /// Installs the filter on the calling thread. Only a syscall: safe between fork and exec.
    /// `no_new_privs` must be set first.
    pub(super) fn install(&self) -> io::Result<()> {
        let fprog = libc::sock_fprog {
            len: self.prog.len() as u16,
            filter: self.prog.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: the program lives as long as `self`; the kernel copies it.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0u32,
                &fprog as *const libc::sock_fprog,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

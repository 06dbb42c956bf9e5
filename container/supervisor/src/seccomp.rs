//! The filter every program the supervisor starts runs under: the container's seccomp
//! profile (Docker's default plus what the supervisor needs to make a run's sandbox) less
//! those additions again. So the code under test, the image's programs and the harness's
//! Python make no namespace and no mount, as under Docker's default profile; only the
//! supervisor itself does.
//!
//! A classic BPF program: for the native architecture (and, on x86-64, the i386 and x32
//! calling conventions, whose numbers differ), `mount`, `umount`/`umount2`, `unshare`,
//! `setns` and `clone` with any namespace flag fail with EPERM; everything else goes on to
//! the container's own filter.

use crate::sys::Result;

/// `CLONE_NEWNS | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWCGROUP`.
const NAMESPACE_FLAGS: u32 = 0x7E02_0000;

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JSET_K: u16 = 0x45;
const AND_K: u16 = 0x54;
const RET_K: u16 = 0x06;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_EPERM: u32 = 0x0005_0000 | libc::EPERM as u32;

/// The calls one calling convention numbers: (audit arch, nr mask, mount-like calls, clone).
struct Abi {
    arch: u32,
    nr_mask: u32,
    denied: &'static [u32],
    clone: u32,
}

#[cfg(target_arch = "x86_64")]
const ABIS: &[Abi] = &[
    // x86-64 and x32 (its numbers are x86-64's with bit 30 set).
    Abi {
        arch: 0xC000_003E,
        nr_mask: !0x4000_0000,
        denied: &[165, 166, 272, 308], // mount, umount2, unshare, setns
        clone: 56,
    },
    // i386.
    Abi {
        arch: 0x4000_0003,
        nr_mask: !0,
        denied: &[21, 22, 52, 310, 346], // mount, umount, umount2, unshare, setns
        clone: 120,
    },
];

#[cfg(target_arch = "aarch64")]
const ABIS: &[Abi] = &[Abi {
    arch: 0xC000_00B7,
    nr_mask: !0,
    denied: &[40, 39, 97, 268], // mount, umount2, unshare, setns
    clone: 220,
}];

#[derive(Clone, Copy)]
enum Target {
    Next,
    Allow,
    Deny,
    Clone(usize),
    Abi(usize),
}

struct Insn {
    code: u16,
    k: u32,
    jt: Target,
    jf: Target,
}

fn op(code: u16, k: u32) -> Insn {
    Insn {
        code,
        k,
        jt: Target::Next,
        jf: Target::Next,
    }
}

fn jump(k: u32, jt: Target, jf: Target) -> Insn {
    Insn {
        code: JEQ_K,
        k,
        jt,
        jf,
    }
}

/// The program as a list of instructions with symbolic jumps, then resolved.
fn program() -> Vec<libc::sock_filter> {
    let mut insns: Vec<Insn> = Vec::new();
    let mut abi_start = Vec::new();
    let mut clone_check = Vec::new();
    for (i, abi) in ABIS.iter().enumerate() {
        abi_start.push(insns.len());
        let other = if i + 1 < ABIS.len() {
            Target::Abi(i + 1)
        } else {
            Target::Allow
        };
        insns.push(op(LD_W_ABS, 4)); // seccomp_data.arch
        insns.push(jump(abi.arch, Target::Next, other));
        insns.push(op(LD_W_ABS, 0)); // seccomp_data.nr
        insns.push(op(AND_K, abi.nr_mask));
        for nr in abi.denied {
            insns.push(jump(*nr, Target::Deny, Target::Next));
        }
        insns.push(jump(abi.clone, Target::Clone(i), Target::Allow));
        clone_check.push(insns.len());
        insns.push(op(LD_W_ABS, 16)); // the low half of args[0]: clone's flags
        insns.push(Insn {
            code: JSET_K,
            k: NAMESPACE_FLAGS,
            jt: Target::Deny,
            jf: Target::Allow,
        });
    }
    let allow = insns.len();
    insns.push(op(RET_K, RET_ALLOW));
    let deny = insns.len();
    insns.push(op(RET_K, RET_EPERM));
    let resolve = |from: usize, t: Target| -> u8 {
        let to = match t {
            Target::Next => from + 1,
            Target::Allow => allow,
            Target::Deny => deny,
            Target::Clone(i) => clone_check[i],
            Target::Abi(i) => abi_start[i],
        };
        (to - from - 1) as u8
    };
    insns
        .iter()
        .enumerate()
        .map(|(i, insn)| libc::sock_filter {
            code: insn.code,
            jt: resolve(i, insn.jt),
            jf: resolve(i, insn.jf),
            k: insn.k,
        })
        .collect()
}

/// Puts this process (and everything it starts) under the filter. Needs no_new_privs.
pub fn restrict() -> Result<()> {
    let filter = program();
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: a valid program that outlives the call; the kernel copies it.
    let rc = unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &prog as *const libc::sock_fprog,
        )
    };
    if rc != 0 {
        return Err(format!(
            "cannot take the sandbox's system calls away from the command: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_jump_lands_inside_the_program() {
        let p = super::program();
        for (i, insn) in p.iter().enumerate() {
            if insn.code == super::JEQ_K || insn.code == super::JSET_K {
                assert!(i + 1 + (insn.jt as usize) < p.len());
                assert!(i + 1 + (insn.jf as usize) < p.len());
            }
        }
        assert_eq!(p.last().unwrap().k, super::RET_EPERM);
    }

    /// In a child process: under the filter, a namespace and a mount are refused, a
    /// plain fork is not.
    #[test]
    fn the_filter_refuses_namespaces_and_mounts_only() {
        // SAFETY: the child makes system calls and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = (|| {
                if super::restrict().is_err() {
                    return 10;
                }
                // SAFETY: plain system calls with valid (or null) arguments.
                unsafe {
                    if libc::unshare(libc::CLONE_NEWUSER) == 0 {
                        return 11;
                    }
                    let rc = libc::syscall(
                        libc::SYS_clone,
                        (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong,
                        0usize,
                        0usize,
                        0usize,
                        0usize,
                    );
                    if rc == 0 {
                        libc::_exit(0);
                    }
                    if rc > 0 {
                        return 12;
                    }
                    let none = c"none";
                    if libc::mount(
                        none.as_ptr(),
                        c"/".as_ptr(),
                        std::ptr::null(),
                        libc::MS_REMOUNT,
                        std::ptr::null(),
                    ) == 0
                        || std::io::Error::last_os_error().raw_os_error() != Some(libc::EPERM)
                    {
                        return 13;
                    }
                    let child = libc::fork();
                    if child == 0 {
                        libc::_exit(0);
                    }
                    if child < 0 {
                        return 14;
                    }
                    let mut status = 0;
                    libc::waitpid(child, &mut status, 0);
                }
                0
            })();
            // SAFETY: ends the child.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(libc::WEXITSTATUS(status), 0, "child failed a check");
    }
}

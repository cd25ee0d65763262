//! Syscall probes run *inside* the sandbox: the test binary re-runs itself with
//! `--exact bwrap::probe` and `REWIND_PROBE="<what> [arg]"`; it prints `errno=N` (0 = success).
#![allow(dead_code)]

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn rc(r: libc::c_long) -> i32 {
    if r < 0 {
        errno()
    } else {
        0
    }
}

fn sun(path: &[u8], abstract_ns: bool) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: zeroed sockaddr_un is valid.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as u16;
    let off = usize::from(abstract_ns);
    for (i, b) in path.iter().enumerate() {
        a.sun_path[i + off] = *b as libc::c_char;
    }
    let len =
        std::mem::size_of::<libc::sa_family_t>() + path.len() + off + usize::from(!abstract_ns);
    (a, len as libc::socklen_t)
}

fn sin(port: u16, ip: [u8; 4]) -> libc::sockaddr_in {
    // SAFETY: zeroed sockaddr_in is valid.
    let mut a: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    a.sin_family = libc::AF_INET as u16;
    a.sin_port = port.to_be();
    a.sin_addr.s_addr = u32::from_ne_bytes(ip);
    a
}

/// Runs one probe and returns the errno (0 = the call succeeded).
pub fn run(what: &str) -> i32 {
    let mut parts = what.splitn(2, ' ');
    let op = parts.next().unwrap_or("");
    let arg = parts.next().unwrap_or("");
    // SAFETY: raw syscalls with valid (or deliberately invalid but harmless) arguments.
    unsafe {
        match op {
            "socket-inet" => rc(libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) as _),
            "socket-inet6" => rc(libc::socket(libc::AF_INET6, libc::SOCK_DGRAM, 0) as _),
            "socket-netlink" => rc(libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, 0) as _),
            "socket-vsock" => rc(libc::socket(libc::AF_VSOCK, libc::SOCK_STREAM, 0) as _),
            "socket-unix" => rc(libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) as _),
            "socketpair-stream" => {
                let mut fds = [0; 2];
                rc(libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) as _)
            }
            "tcp" | "udp" => {
                // arg: "a.b.c.d:port"
                let (ip, port) = arg.rsplit_once(':').unwrap();
                let ip: std::net::Ipv4Addr = ip.parse().unwrap();
                let a = sin(port.parse().unwrap(), ip.octets());
                let ty = if op == "tcp" {
                    libc::SOCK_STREAM
                } else {
                    libc::SOCK_DGRAM
                };
                let fd = libc::socket(libc::AF_INET, ty, 0);
                if fd < 0 {
                    return errno();
                }
                let p = &a as *const _ as *const libc::sockaddr;
                let n = std::mem::size_of::<libc::sockaddr_in>() as u32;
                if op == "tcp" {
                    rc(libc::connect(fd, p, n) as _)
                } else {
                    rc(libc::sendto(fd, b"x".as_ptr().cast(), 1, 0, p, n) as _)
                }
            }
            "unix-stream" | "unix-abstract" => {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                if fd < 0 {
                    return errno();
                }
                let (a, n) = sun(arg.as_bytes(), op == "unix-abstract");
                rc(libc::connect(fd, &a as *const _ as *const libc::sockaddr, n) as _)
            }
            "unix-dgram" => {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0);
                if fd < 0 {
                    return errno();
                }
                let (a, n) = sun(arg.as_bytes(), false);
                rc(libc::sendto(
                    fd,
                    b"x".as_ptr().cast(),
                    1,
                    0,
                    &a as *const _ as *const libc::sockaddr,
                    n,
                ) as _)
            }
            "socketpair-dgram-sendmsg" => {
                // A datagram socketpair could address any path with sendmsg: must be refused.
                let mut fds = [0; 2];
                if libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM, 0, fds.as_mut_ptr()) != 0 {
                    return errno();
                }
                let (mut a, n) = sun(arg.as_bytes(), false);
                let mut iov = libc::iovec {
                    iov_base: b"x".as_ptr() as *mut _,
                    iov_len: 1,
                };
                let mut msg: libc::msghdr = std::mem::zeroed();
                msg.msg_name = &mut a as *mut _ as *mut _;
                msg.msg_namelen = n;
                msg.msg_iov = &mut iov;
                msg.msg_iovlen = 1;
                rc(libc::sendmsg(fds[0], &msg, 0) as _)
            }
            "io_uring" => {
                let mut params = [0u8; 120];
                rc(libc::syscall(
                    libc::SYS_io_uring_setup,
                    4,
                    params.as_mut_ptr(),
                ))
            }
            "ptrace" => rc(libc::ptrace(libc::PTRACE_ATTACH, 1, 0, 0)),
            "vm_readv" => {
                let mut buf = [0u8; 8];
                let local = libc::iovec {
                    iov_base: buf.as_mut_ptr().cast(),
                    iov_len: 8,
                };
                let remote = libc::iovec {
                    iov_base: 0x1000 as *mut _,
                    iov_len: 8,
                };
                rc(libc::process_vm_readv(1, &local, 1, &remote, 1, 0) as _)
            }
            "proc1mem" => match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/proc/1/mem")
            {
                Ok(_) => 0,
                Err(e) => e.raw_os_error().unwrap_or(-1),
            },
            "unshare-user" => rc(libc::unshare(libc::CLONE_NEWUSER) as _),
            "unshare-ns" => rc(libc::unshare(libc::CLONE_NEWNS) as _),
            "mount" => rc(libc::mount(
                c"none".as_ptr(),
                c"/tmp".as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                std::ptr::null(),
            ) as _),
            "umount" => {
                let p = std::ffi::CString::new(arg).unwrap();
                rc(libc::umount2(p.as_ptr(), libc::MNT_DETACH) as _)
            }
            "tiocsti" => {
                let c = b'x';
                rc(libc::ioctl(0, libc::TIOCSTI, &c) as _)
            }
            "keyctl" => rc(libc::syscall(
                libc::SYS_keyctl,
                0, /* KEYCTL_GET_KEYRING_ID */
                -3,
                0,
            )),
            "nnp" => {
                // errno 0 and NNP=1 expected
                println!("nnp={}", libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
                0
            }
            #[cfg(target_arch = "x86_64")]
            "int80" => {
                // i386 getpid via int 0x80: the filter's architecture check kills the process.
                let mut ret: i64 = 20;
                std::arch::asm!("int 0x80", inout("rax") ret);
                println!("int80 returned {ret}");
                0
            }
            #[cfg(target_arch = "x86_64")]
            "x32" => rc(libc::syscall(0x4000_0000 | libc::SYS_getpid)),
            // Inherited descriptors: "fd-write N", "fd-openat N NAME", "fd-mkdirat N NAME".
            "fd-write" => rc(libc::write(arg.parse().unwrap(), b"pwned\n".as_ptr().cast(), 6) as _),
            "fd-openat" | "fd-mkdirat" => {
                let (fd, name) = arg.split_once(' ').unwrap();
                let name = std::ffi::CString::new(name).unwrap();
                let fd: i32 = fd.parse().unwrap();
                if op == "fd-openat" {
                    rc(libc::openat(fd, name.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644) as _)
                } else {
                    rc(libc::mkdirat(fd, name.as_ptr(), 0o755) as _)
                }
            }
            // Set-id bits: "<call> PATH OCTAL-MODE", each through the raw system call.
            "openat-mode" | "tmpfile-mode" | "mknodat-mode" | "fchmodat-mode" | "openat2-mode" => {
                let (path, mode) = arg.split_once(' ').unwrap();
                let path = std::ffi::CString::new(path).unwrap();
                let mode = u32::from_str_radix(mode, 8).unwrap();
                let at = libc::AT_FDCWD;
                let creat = libc::O_CREAT | libc::O_WRONLY;
                rc(match op {
                    "openat-mode" => {
                        libc::syscall(libc::SYS_openat, at, path.as_ptr(), creat, mode)
                    }
                    "tmpfile-mode" => libc::syscall(
                        libc::SYS_openat,
                        at,
                        path.as_ptr(),
                        libc::O_TMPFILE | libc::O_WRONLY,
                        mode,
                    ),
                    "mknodat-mode" => libc::syscall(
                        libc::SYS_mknodat,
                        at,
                        path.as_ptr(),
                        libc::S_IFREG | mode,
                        0,
                    ),
                    "fchmodat-mode" => libc::syscall(libc::SYS_fchmodat, at, path.as_ptr(), mode),
                    _ => {
                        let how: [u64; 3] = [creat as u64, mode as u64, 0];
                        libc::syscall(libc::SYS_openat2, at, path.as_ptr(), how.as_ptr(), 24)
                    }
                })
            }
            _ => panic!("unknown probe {what:?}"),
        }
    }
}

/// The entry point used by every test binary that has `mod probe;`.
pub fn main_if_probing() {
    if let Ok(what) = std::env::var("REWIND_PROBE") {
        let e = run(&what);
        println!("errno={e}");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        std::process::exit(0);
    }
}

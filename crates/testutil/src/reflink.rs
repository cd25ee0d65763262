//! A file system with copy-on-write clones for the tests of cloned content: a btrfs image,
//! loop-mounted in a temporary directory, unmounted and removed when the handle drops.
//!
//! Needs root (to mount) and `mkfs.btrfs` (Debian's btrfs-progs, which the test script
//! installs). Without them the test fails saying so: a clone path that is never exercised
//! must not pass as tested.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted btrfs volume. Dropping it unmounts it (lazily, should a test leave a file open).
pub struct ReflinkVolume {
    dir: tempfile::TempDir,
    mount: PathBuf,
}

impl ReflinkVolume {
    /// Makes and mounts a fresh volume of `mib` MiB (the image is sparse: it takes what is
    /// written to it).
    pub fn new(mib: u64) -> ReflinkVolume {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(
            root,
            "the cloned-content tests mount a btrfs image: run them as root"
        );
        let dir = tempfile::Builder::new()
            .prefix("rewind-reflink-")
            .tempdir_in(
                std::env::var_os("REWIND_TEST_VOLUMES")
                    .map_or_else(std::env::temp_dir, PathBuf::from),
            )
            .unwrap();
        let image = dir.path().join("volume.img");
        let mount = dir.path().join("mnt");
        std::fs::create_dir(&mount).unwrap();
        std::fs::File::create(&image)
            .unwrap()
            .set_len(mib << 20)
            .unwrap();
        run(
            Command::new("mkfs.btrfs").arg("-q").arg("-f").arg(&image),
            "mkfs.btrfs (apt-get install -y btrfs-progs)",
        );
        run(
            Command::new("mount")
                .arg("-o")
                .arg("loop")
                .arg(&image)
                .arg(&mount),
            "mount -o loop",
        );
        ReflinkVolume { dir, mount }
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.mount
    }

    /// Bytes in use on the volume (`statvfs`: blocks less free blocks).
    pub fn used_bytes(&self) -> u64 {
        // btrfs counts a write's blocks only once its transaction commits.
        run(Command::new("sync").arg("-f").arg(&self.mount), "sync -f");
        let c = std::ffi::CString::new(self.mount.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string and a zeroed struct for the kernel to fill.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut s) }, 0);
        (s.f_blocks - s.f_bfree) as u64 * s.f_frsize as u64
    }
}

impl Drop for ReflinkVolume {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        let _ = &self.dir;
    }
}

fn run(cmd: &mut Command, what: &str) {
    match cmd.output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "{what} failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => panic!("{what} could not run: {e}"),
    }
}

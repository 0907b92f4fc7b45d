//! Priorities of background work: the snapshot thread runs at a lower CPU
//! priority and in the idle I/O class, so it uses what the request path
//! leaves of the CPUs and the disk serves the log's syncs before it.

/// Niceness of background threads (snapshot writing).
const BACKGROUND_NICE: i32 = 10;
/// `IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE, 0)` for `ioprio_set(2)`.
const IOPRIO_IDLE: libc::c_int = 3 << 13;
/// `IOPRIO_WHO_PROCESS`: the target is a thread id.
const IOPRIO_WHO_PROCESS: libc::c_int = 1;

/// Lowers the calling thread's CPU and I/O priority for background work,
/// so it runs on what the request path leaves.
pub fn background() {
    // SAFETY: plain syscalls on the calling thread's id.
    let (cpu, io) = unsafe {
        let tid = libc::gettid();
        (
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, BACKGROUND_NICE),
            libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, tid, IOPRIO_IDLE),
        )
    };
    if cpu != 0 || io != 0 {
        tracing::debug!(
            "background priority not fully set: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (nice, I/O priority) of the calling thread.
    fn priorities() -> (i32, libc::c_long) {
        // SAFETY: plain syscalls on the calling thread's id.
        unsafe {
            let tid = libc::gettid();
            (
                libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t),
                libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, tid),
            )
        }
    }

    #[test]
    fn background_applies_to_the_calling_thread_only() {
        let before = priorities();
        let lowered = std::thread::spawn(|| {
            background();
            priorities()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (BACKGROUND_NICE, IOPRIO_IDLE as libc::c_long));
        assert_eq!(priorities(), before, "the caller was changed");
    }
}

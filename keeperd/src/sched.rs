//! Scheduling hints. The request path's threads run for microseconds per
//! wakeup (a request, a sync completing); on a CPU busy with long-running
//! work, a default-slice wakeup often cannot preempt and waits up to a timer
//! tick (4 ms at 250 Hz) for the running task's slice to end. A short slice
//! (`sched_runtime` of `sched_setattr(2)`, EEVDF, Linux 6.12 and later) lets
//! it preempt. It is a latency hint, not a priority: the thread gets no more
//! CPU time than before. Background work gets a lower CPU priority and the
//! idle I/O class instead, so the disk serves the log's syncs first.

/// Slice asked for by the request path's threads; the kernel's minimum.
const SLICE_NS: u64 = 100_000;
/// Niceness of background threads (snapshot writing).
const BACKGROUND_NICE: i32 = 10;
/// `IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE, 0)` for `ioprio_set(2)`.
const IOPRIO_IDLE: libc::c_int = 3 << 13;
/// `IOPRIO_WHO_PROCESS`: the target is a thread id.
const IOPRIO_WHO_PROCESS: libc::c_int = 1;

/// `struct sched_attr` (SCHED_ATTR_SIZE_VER0).
#[repr(C)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// Asks for short scheduler slices for the calling thread (SCHED_OTHER,
/// nice 0). Kernels without custom slices refuse or ignore it; either way
/// the thread keeps running as before.
pub fn short_slices() {
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice: 0,
        priority: 0,
        runtime: SLICE_NS,
        deadline: 0,
        period: 0,
    };
    // SAFETY: sched_setattr reads `attr.size` bytes of a live, correctly laid out struct.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if r != 0 {
        tracing::debug!(
            "no short scheduler slice: {}",
            std::io::Error::last_os_error()
        );
    }
}

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

    fn runtime_and_nice() -> (u64, i32) {
        let mut attr = SchedAttr {
            size: 0,
            policy: 0,
            flags: 0,
            nice: 0,
            priority: 0,
            runtime: 0,
            deadline: 0,
            period: 0,
        };
        let size = std::mem::size_of::<SchedAttr>() as u32;
        // SAFETY: sched_getattr writes at most `size` bytes into `attr`.
        let r = unsafe {
            libc::syscall(
                libc::SYS_sched_getattr,
                0,
                &mut attr as *mut SchedAttr,
                size,
                0,
            )
        };
        assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
        (attr.runtime, attr.nice)
    }

    fn ioprio() -> libc::c_long {
        // SAFETY: a plain syscall on the calling thread's id.
        unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, libc::gettid()) }
    }

    #[test]
    fn hints_apply_to_the_calling_thread_only() {
        let (before, _) = runtime_and_nice();
        let io_before = ioprio();
        let (short, background, io) = std::thread::spawn(|| {
            short_slices();
            let short = runtime_and_nice().0;
            background();
            (short, runtime_and_nice().1, ioprio())
        })
        .join()
        .unwrap();
        // Kernels before 6.12 keep their default slice; newer ones report ours.
        assert!(short == SLICE_NS || short == before, "slice {short}");
        assert_eq!(background, BACKGROUND_NICE);
        assert_eq!(io, IOPRIO_IDLE as libc::c_long);
        assert_eq!(runtime_and_nice(), (before, 0), "the caller was changed");
        assert_eq!(ioprio(), io_before, "the caller's I/O class was changed");
    }
}

# cython: language_level=3
"""Hand-offs between an event loop and the worker threads that cost no system call while the
other side is spinning (see chunkstore.aio.run).

A wake-up through a pipe or a futex costs 20-60 us on a virtual machine whose idle core is
halted (the hypervisor must run it again), as much as a small tile read itself. Here a side
that expects the other soon waits by spinning on a shared int, WITHOUT the GIL (a spinning
thread holding it would stall the thread it waits for), for a bounded time; a store to the
int then hands over in well under a microsecond. Each flag is stored only after the storing
thread has let go of the GIL, so the thread that sees it takes a free GIL instead of
sleeping on it (which would cost the very wake-up saved).

Spinning threads must not take cores from threads that have work (other processes' too):
every few microseconds a spinner yields its core to any thread waiting for one, and gives up
at its time limit. And where the cores are wanted, spinning is a loss even so (the spinners
use up their share of the CPU, and the thread that then has the work to do waits its turn:
4 processes of lone-task reads on a busy 2-core machine took 2.6-3.6x as long as without
spinning): three spins in a row that found their thread had the CPU for under half of the
spin (its CPU time against the clock) stop the whole process spinning for a while
(set_backoff).

A worker's state: BUSY (running), SPINNING (parked, spinning), BLOCKED (parked, asleep on its
pipe), PENDING (handed a job while it spun; the loop that handed it holds the GIL and says
"go" once it lets go of it) and HANDED (go). Whoever hands a job moves SPINNING to PENDING or
HANDED with a compare-and-swap; when that fails the worker is (or is about to be) asleep on
its pipe and gets a byte there. A PENDING worker that hears nothing within PENDING_NS goes
on by itself (the loop stopped, or is busy): a job handed is always run.
"""

from libc.errno cimport EINTR, EAGAIN, errno

cdef extern from "<unistd.h>" nogil:
    ssize_t read(int fd, void* buf, size_t n)
    ssize_t write(int fd, const void* buf, size_t n)

cdef extern from "<sched.h>" nogil:
    int sched_yield()

cdef extern from "<poll.h>" nogil:
    struct pollfd:
        int fd
        short events
        short revents
    int poll(pollfd* fds, unsigned long nfds, int timeout)
    short POLLIN

cdef extern from *:
    """
    #include <time.h>
    static inline int cs_load(int* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline void cs_store(int* p, int v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    static inline int cs_cas(int* p, int expect, int v) {
        return __atomic_compare_exchange_n(p, &expect, v, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
    static inline long long cs_now_ns(void) {
        struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
        return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
    }
    static inline long long cs_cpu_ns(void) {
        struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
        return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
    }
    /* until when (monotonic ns) this process spins no more: its spinners were descheduled */
    static long long cs_contended_until = 0;
    static long long cs_backoff_ns = 20000000;  /* set_backoff (chunkstore.aio.run sets it) */
    static inline int cs_contended(long long now) {
        return now < __atomic_load_n(&cs_contended_until, __ATOMIC_RELAXED);
    }
    static inline void cs_set_contended(long long until) {
        __atomic_store_n(&cs_contended_until, until, __ATOMIC_RELAXED);
    }
    /* a spin from (wall0, cpu0) to now: had the thread the CPU for under half of it? */
    /* spins in a row that found their thread descheduled (one alone: an interrupt, the
       hypervisor taking the core a while) */
    static int cs_strikes = 0;
    static inline void cs_judge(long long wall0, long long cpu0) {
        long long wall = cs_now_ns() - wall0;
        if (wall < 20000)
            return;
        if (2 * (cs_cpu_ns() - cpu0) >= wall) {
            __atomic_store_n(&cs_strikes, 0, __ATOMIC_RELAXED);
        } else if (__atomic_add_fetch(&cs_strikes, 1, __ATOMIC_RELAXED) >= 3) {
            __atomic_store_n(&cs_strikes, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&cs_contended_until, cs_now_ns() + cs_backoff_ns,
                             __ATOMIC_RELAXED);
        }
    }
    static inline void cs_set_backoff(long long ns) { cs_backoff_ns = ns; }
    static inline void cs_relax(void) {
    #if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
    #elif defined(__aarch64__)
        __asm__ __volatile__("yield");
    #endif
    }
    """
    int cs_load(int* p) nogil
    void cs_store(int* p, int v) nogil
    bint cs_cas(int* p, int expect, int v) nogil
    long long cs_now_ns() nogil
    long long cs_cpu_ns() nogil
    bint cs_contended(long long now) nogil
    void cs_set_contended(long long until) nogil
    void cs_judge(long long wall0, long long cpu0) nogil
    void cs_set_backoff(long long ns) nogil
    void cs_relax() nogil

cdef enum:
    C_BUSY = 0
    C_SPINNING = 1
    C_BLOCKED = 2
    C_HANDED = 3
    C_PENDING = 4

BUSY = C_BUSY
SPINNING = C_SPINNING
BLOCKED = C_BLOCKED
HANDED = C_HANDED
PENDING = C_PENDING

# how long a PENDING worker waits for its go before it goes on by itself
DEF PENDING_NS = 50000

# spin iterations between clock (and event) checks: a few microseconds of pause instructions
DEF CHECK_EVERY = 64


cdef class Flag:
    """An int shared between threads, read and written atomically."""

    cdef int value

    def __cinit__(self, int value=0):
        self.value = value

    def get(self) -> int:
        """The value now."""
        return cs_load(&self.value)

    def set(self, int value) -> None:
        """Store value (with the GIL: prefer passing the flag to park/loop_wait, which store
        it after letting go of the GIL)."""
        cs_store(&self.value, value)

    def swap(self, int expect, int value) -> bool:
        """Store value if the flag holds expect; whether it did."""
        return cs_cas(&self.value, expect, value)


cdef int _write_byte(int fd) noexcept nogil:
    cdef char b = 0
    cdef ssize_t r
    while True:
        r = write(fd, &b, 1)
        if r >= 0 or (errno != EINTR):
            return 0 if r == 1 or errno == EAGAIN else -1


cdef inline void _go(Flag state, int fd) noexcept nogil:
    # a job was handed to this parked worker: no system call if it spins
    if not cs_cas(&state.value, C_SPINNING, C_HANDED):
        _write_byte(fd)


def go(Flag state, int wake_fd) -> None:
    """Tell a parked worker that a job was handed to it (a byte on its pipe unless it
    spins)."""
    with nogil:
        _go(state, wake_fd)


def hand(Flag state, int wake_fd) -> bool:
    """(an event loop, holding the GIL) Tell a parked worker that a job was handed to it,
    but, when it spins, only that it is coming (PENDING): then True, and loop_wait says go
    once the loop has let go of the GIL."""
    if cs_cas(&state.value, C_SPINNING, C_PENDING):
        return True
    with nogil:
        _go(state, wake_fd)
    return False


def park(Flag state, Flag post, long long spin_ns, int wake_fd) -> None:
    """(a worker going idle, state SPINNING or BLOCKED) Store 1 in post (when not None) once
    the GIL is let go of, then wait for a job: spin up to spin_ns for HANDED (PENDING: up to
    PENDING_NS more), then sleep on the pipe wake_fd. Returns with state BUSY."""
    cdef int* p = NULL
    cdef char b
    cdef ssize_t r
    cdef long long until, now
    cdef long long pending_until = 0
    cdef int i = 0, st
    cdef bint handed = False
    cdef long long wall0, cpu0 = 0
    if post is not None:
        p = &post.value
    with nogil:
        if p != NULL:
            cs_store(p, 1)
        wall0 = cs_now_ns()
        if cs_contended(wall0):
            spin_ns = 0   # (a job handed meanwhile still ends the wait below at once)
        else:
            cpu0 = cs_cpu_ns()
        until = wall0 + spin_ns
        while True:
            st = cs_load(&state.value)
            if st == C_HANDED:
                handed = True
                break
            if st == C_BLOCKED:
                break
            cs_relax()
            i += 1
            if i % CHECK_EVERY == 0:
                now = cs_now_ns()
                if st == C_PENDING:
                    if pending_until == 0:
                        pending_until = now + PENDING_NS
                    elif now > pending_until:
                        handed = True  # (the loop said nothing: the job is run anyway)
                        break
                elif now > until:
                    # asleep from here, unless a job came meanwhile
                    if cs_cas(&state.value, C_SPINNING, C_BLOCKED):
                        break
                    continue
                sched_yield()  # (a thread waiting for this core runs first)
        if spin_ns:
            cs_judge(wall0, cpu0)
        if not handed:
            while True:
                r = read(wake_fd, &b, 1)
                if r >= 0 or errno != EINTR:
                    break
        cs_store(&state.value, C_BUSY)


def contended() -> bool:
    """Whether this process spins no more for now: a spinner found it had had the CPU for
    under half of its spin (other threads or processes wanted the cores), or the caller
    said so (set_contended); spinning resumes set_backoff's time after the last finding."""
    return cs_contended(cs_now_ns())


def set_backoff(long long ns) -> None:
    """How long a spinner that found itself descheduled stops the process spinning (ns)."""
    cs_set_backoff(ns)


def set_contended(long long ns) -> None:
    """Spin no more for the next ns nanoseconds (0: spin again from now on)."""
    cs_set_contended(cs_now_ns() + ns if ns > 0 else 0)


def tell(list gos) -> None:
    """(an event loop) Say go to the workers in gos (the states of those `hand` left
    PENDING), letting go of the GIL first."""
    cdef Flag f
    cdef Py_ssize_t n = len(gos)
    if n == 1:
        f = gos[0]
        with nogil:
            cs_cas(&f.value, C_PENDING, C_HANDED)
        return
    loop_wait(None, gos, 0, -1)


def loop_wait(Flag done, list gos, long long spin_ns, int event_fd) -> int:
    """(an event loop with nothing else to do) Let go of the GIL, say go to the workers in
    gos (the states of those `hand` left PENDING), then spin until done is
    stored (a result came), an event is pending on event_fd (the loop's selector: its
    readiness, or another thread's call_soon_threadsafe), or spin_ns passed. Returns 1 when
    done was seen, 2 on an event, 0 when the time was up."""
    cdef Py_ssize_t n = len(gos), k
    cdef int* flags[64]
    cdef long long until
    cdef int i = 0
    cdef int seen = 0
    cdef long long wall0, cpu0 = 0
    cdef pollfd pfd
    cdef Flag f
    if n > 64:  # (the rest with the GIL: more than 64 workers handed jobs at once is rare)
        for f in gos[64:]:
            cs_cas(&f.value, C_PENDING, C_HANDED)
        n = 64
    for k in range(n):
        f = gos[k]
        flags[k] = &f.value
    pfd.fd = event_fd
    pfd.events = POLLIN
    with nogil:
        for k in range(n):
            # (fails when the worker went on by itself, and perhaps parked again since)
            cs_cas(flags[k], C_PENDING, C_HANDED)
        wall0 = cs_now_ns()
        if spin_ns > 0 and cs_contended(wall0):
            spin_ns = 0
        if spin_ns > 0:
            cpu0 = cs_cpu_ns()
        until = wall0 + spin_ns
        while spin_ns > 0:
            if cs_load(&done.value):
                seen = 1
                break
            cs_relax()
            i += 1
            if i % CHECK_EVERY == 0:
                if cs_now_ns() > until:
                    break
                pfd.revents = 0
                if event_fd >= 0 and poll(&pfd, 1, 0) > 0:
                    seen = 2
                    break
                sched_yield()  # (a thread waiting for this core runs first)
        if spin_ns > 0:
            cs_judge(wall0, cpu0)
    return seen

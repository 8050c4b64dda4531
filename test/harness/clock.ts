// The one clock that the test processes share: what a child process logs and what the test
// compares across processes is read from it.

/**
 * Milliseconds on the machine's monotonic clock (Linux CLOCK_MONOTONIC, through
 * `process.hrtime`): one clock for every process on the machine, never stepped.
 *
 * Not `performance.timeOrigin + performance.now()`: Node reads its time origin's two parts (the
 * monotonic clock and the wall clock) one after the other as the process starts, and a process
 * preempted between the two reads carries the gap in every stamp it makes. Of 180 Node processes
 * started at once on a loaded 2-core machine, one stamped 68 ms late; an invariant run saw one
 * worker's leases seem to overlap the next holder's by 27 and 32 ms that way. Nor `Date.now()`:
 * the wall clock may be stepped, and it counts whole ms.
 */
export const machineMs = (): number => Number(process.hrtime.bigint()) / 1e6;

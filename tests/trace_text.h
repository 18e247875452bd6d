/*
 * trace_text.h — the lines of a synthetic trace, as `meshtrain train --trace`
 * writes them (src/profile/trace.c), for tests that hand-write one: the first
 * and the last line, and an "X" event of a category on a tid.
 */
#ifndef MT_TESTS_TRACE_TEXT_H
#define MT_TESTS_TRACE_TEXT_H

#define HEAD "{\"traceEvents\":[\n"
#define TAIL "\n],\"displayTimeUnit\":\"ms\"}\n"
#define X(name, cat, tid, ts, dur) \
    "{\"name\":\"" name "\",\"cat\":\"" cat "\",\"ph\":\"X\",\"ts\":" #ts ",\"dur\":" #dur \
    ",\"pid\":0,\"tid\":" #tid "}"

#endif /* MT_TESTS_TRACE_TEXT_H */

/* A stand-in for the few libcupti entry points the fast path calls, for tests without a GPU.
 * cuptiActivityFlushAll delivers the test's records the way CUPTI does: from a thread of its own (a
 * pthread, not a Python thread), asking for a buffer, filling it, and handing it back completed. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void (*requested_t)(uint8_t **buffer, size_t *size, size_t *max_records);
typedef void (*completed_t)(void *context, uint32_t stream_id, uint8_t *buffer, size_t size, size_t valid);

static requested_t requested;
static completed_t completed;
static uint32_t version = 130401;
static const uint8_t *source;
static size_t source_len;
static int buffers_per_flush = 1;
static int64_t sizes[256];
static int copy_records = 1;
static int enabled[256];

int cuptiGetVersion(uint32_t *v) { *v = version; return 0; }
int cuptiActivityRegisterCallbacks(requested_t r, completed_t c) { requested = r; completed = c; return 0; }
int cuptiActivityEnable(int kind) { enabled[kind & 255] = 1; return 0; }
int cuptiActivityDisable(int kind) { enabled[kind & 255] = 0; return 0; }
int standin_enabled(int kind) { return enabled[kind & 255]; }
/* 0: hand buffers back as they are (a benchmark that filled every pool buffer once skips CUPTI's copy). */
void standin_copy(int on) { copy_records = on; }
void standin_set(uint32_t v, const uint8_t *src, size_t len, int per_flush, const int64_t *record_sizes) {
    version = v; source = src; source_len = len; buffers_per_flush = per_flush;
    memcpy(sizes, record_sizes, sizeof(sizes));
}

/* libcupti's walker, from the record sizes the test gives (CUPTI knows them per kind). */
int cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, uint8_t **record) {
    size_t at = 0;
    if (*record != NULL) {
        uint32_t kind = *(uint32_t *)*record;
        if (kind > 255 || sizes[kind] == 0) return 21;
        at = (size_t)(*record - buffer) + (size_t)sizes[kind];
    }
    if (at + 4 > valid) return 12; /* CUPTI_ERROR_MAX_LIMIT_REACHED: no more records */
    *record = buffer + at;
    return 0;
}

static void *deliver(void *unused) {
    uint8_t *buffer = NULL;
    size_t size = 0, max_records = 0;
    (void)unused;
    requested(&buffer, &size, &max_records);
    size_t n = source_len < size ? source_len : size;
    if (copy_records) memcpy(buffer, source, n);
    completed(NULL, 0, buffer, size, n);
    return NULL;
}

int cuptiActivityFlushAll(uint32_t flag) {
    (void)flag;
    for (int i = 0; i < buffers_per_flush; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, deliver, NULL) != 0) return 1;
        pthread_join(t, NULL);
    }
    return 0;
}

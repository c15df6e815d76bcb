/* A stand-in for the HIP and CUDA runtimes' registration entry points, for loading a library
 * on a machine without a GPU runtime: every device-code container a library registers when it
 * is loaded is written, byte for byte as it lies in memory, to $STUB_DIR/reg-NNN.bin (in the
 * order of registration). Kernel launches and the rest do nothing. Built by the tests. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int count;

static void dump(const unsigned char *data, size_t size) {
    const char *dir = getenv("STUB_DIR");
    char path[4096];
    if (!dir || !data || !size) return;
    snprintf(path, sizeof path, "%s/reg-%03d.bin", dir, count++);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, size, f);
    fclose(f);
}

static size_t bundle_size(const unsigned char *b) {  /* the end of its last entry */
    uint64_t n, off, size, idlen, end = 32, pos = 32;
    memcpy(&n, b + 24, 8);
    for (uint64_t i = 0; i < n && i < 4096; i++) {
        memcpy(&off, b + pos, 8); memcpy(&size, b + pos + 8, 8); memcpy(&idlen, b + pos + 16, 8);
        pos += 24 + idlen;
        if (off + size > end) end = off + size;
    }
    return pos > end ? pos : end;
}

static size_t container_size(const unsigned char *b) {
    if (!memcmp(b, "__CLANG_OFFLOAD_BUNDLE__", 24)) return bundle_size(b);
    if (!memcmp(b, "CCOB", 4)) {
        uint16_t version; memcpy(&version, b + 4, 2);
        if (version == 2) { uint32_t t; memcpy(&t, b + 8, 4); return t; }
        if (version == 3) { uint64_t t; memcpy(&t, b + 8, 8); return t; }
        return 0;
    }
    if (!memcmp(b, "\x50\xed\x55\xba", 4)) {  /* fatbin: 16-byte header + its body */
        uint16_t hsize; uint64_t body; memcpy(&hsize, b + 6, 2); memcpy(&body, b + 8, 8);
        return hsize + body;
    }
    return 0;
}

struct wrapper { int magic; int version; const unsigned char *data; void *rest; };

void **__hipRegisterFatBinary(const struct wrapper *w) {
    dump(w->data, container_size(w->data));
    return (void **)w;
}
void **__cudaRegisterFatBinary(const struct wrapper *w) {
    dump(w->data, container_size(w->data));
    return (void **)w;
}
void __cudaRegisterFatBinaryEnd(void **h) { (void)h; }
void __hipUnregisterFatBinary(void **h) { (void)h; }
void __cudaUnregisterFatBinary(void **h) { (void)h; }
void __hipRegisterFunction(void) {}
void __cudaRegisterFunction(void) {}
void __hipRegisterVar(void) {}
void __cudaRegisterVar(void) {}
int __hipPushCallConfiguration(void) { return 0; }
int __hipPopCallConfiguration(void) { return 0; }
unsigned __cudaPushCallConfiguration(void) { return 0; }
int __cudaPopCallConfiguration(void) { return 0; }
int hipLaunchKernel(void) { return 0; }
int cudaLaunchKernel(void) { return 0; }
int __cudaLaunchKernel(void) { return 0; }
void *__cudaGetKernel(void) { return 0; }

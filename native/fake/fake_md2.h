/* MD2 (RFC 1319) and HMAC-MD2 (RFC 2104 with MD2's 16-byte block): the digest the CUDA runtime
 * asks the driver for at start-up (fake_cuda_export.c). Pure; no state outside the context. */
#ifndef FAKEGPU_MD2_H
#define FAKEGPU_MD2_H

#include <stddef.h>
#include <stdint.h>

struct fg_md2 {
  unsigned char x[48];        /* state (16 bytes) | block (16) | state ^ block (16) */
  unsigned char checksum[16];
  unsigned char used;         /* bytes of the current block */
  unsigned char last;         /* last checksum byte */
};

void fg_md2_init(struct fg_md2 *c);
void fg_md2_update(struct fg_md2 *c, const void *data, size_t len);
void fg_md2_final(struct fg_md2 *c, unsigned char digest[16]);

/* HMAC-MD2 of `len` bytes under a 16-byte key, fed through `feed` so callers can stream. */
void fg_hmac_md2_begin(struct fg_md2 *c, const unsigned char key[16]);
void fg_hmac_md2_end(struct fg_md2 *c, const unsigned char key[16], unsigned char mac[16]);

#endif

/* MD2 after RFC 1319, section 3; HMAC after RFC 2104 (block size 16). */
#include "fake_md2.h"

#include <string.h>

/* RFC 1319's permutation of 0..255 built from the digits of pi. */
static const unsigned char pi_subst[256] = {
    41,  46,  67,  201, 162, 216, 124, 1,   61,  54,  84,  161, 236, 240, 6,   19,  98,  167, 5,   243, 192, 199,
    115, 140, 152, 147, 43,  217, 188, 76,  130, 202, 30,  155, 87,  60,  253, 212, 224, 22,  103, 66,  111, 24,
    138, 23,  229, 18,  190, 78,  196, 214, 218, 158, 222, 73,  160, 251, 245, 142, 187, 47,  238, 122, 169, 104,
    121, 145, 21,  178, 7,   63,  148, 194, 16,  137, 11,  34,  95,  33,  128, 127, 93,  154, 90,  144, 50,  39,
    53,  62,  204, 231, 191, 247, 151, 3,   255, 25,  48,  179, 72,  165, 181, 209, 215, 94,  146, 42,  172, 86,
    170, 198, 79,  184, 56,  210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4,   241, 69,  157, 112, 89,
    100, 113, 135, 32,  134, 91,  207, 101, 230, 45,  168, 2,   27,  96,  37,  173, 174, 176, 185, 246, 28,  70,
    97,  105, 52,  64,  126, 15,  85,  71,  163, 35,  221, 81,  175, 58,  195, 92,  249, 206, 186, 197, 234, 38,
    44,  83,  13,  110, 133, 40,  132, 9,   211, 223, 205, 244, 65,  129, 77,  82,  106, 220, 55,  200, 108, 193,
    171, 250, 36,  225, 123, 8,   12,  189, 177, 74,  120, 136, 149, 139, 227, 99,  232, 109, 233, 203, 213, 254,
    59,  0,   29,  57,  242, 239, 183, 14,  102, 88,  208, 228, 166, 119, 114, 248, 235, 117, 75,  10,  49,  68,
    80,  180, 143, 237, 31,  26,  219, 153, 141, 51,  159, 17,  131, 20,
};

void fg_md2_init(struct fg_md2 *c) { memset(c, 0, sizeof *c); }

/* One 16-byte block (already in x[16..31]) folded into the state: 18 rounds over 48 bytes. */
static void compress(struct fg_md2 *c) {
  for (int j = 0; j < 16; j++) c->x[32 + j] = c->x[16 + j] ^ c->x[j];
  unsigned char t = 0;
  for (int round = 0; round < 18; round++) {
    for (int k = 0; k < 48; k++) t = c->x[k] ^= pi_subst[t];
    t = (unsigned char)(t + round);
  }
}

void fg_md2_update(struct fg_md2 *c, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) {
    c->x[16 + c->used] = p[i];
    c->last = c->checksum[c->used] ^= pi_subst[p[i] ^ c->last];
    if (++c->used == 16) {
      compress(c);
      c->used = 0;
    }
  }
}

void fg_md2_final(struct fg_md2 *c, unsigned char digest[16]) {
  unsigned char pad[16];
  unsigned char n = (unsigned char)(16 - c->used);
  memset(pad, n, n);
  fg_md2_update(c, pad, n);
  unsigned char sum[16];
  memcpy(sum, c->checksum, 16);
  fg_md2_update(c, sum, 16);
  memcpy(digest, c->x, 16);
}

static void keyed(struct fg_md2 *c, const unsigned char key[16], unsigned char pad) {
  unsigned char k[16];
  for (int i = 0; i < 16; i++) k[i] = key[i] ^ pad;
  fg_md2_init(c);
  fg_md2_update(c, k, 16);
}

void fg_hmac_md2_begin(struct fg_md2 *c, const unsigned char key[16]) { keyed(c, key, 0x36); }

void fg_hmac_md2_end(struct fg_md2 *c, const unsigned char key[16], unsigned char mac[16]) {
  unsigned char inner[16];
  fg_md2_final(c, inner);
  keyed(c, key, 0x5c);
  fg_md2_update(c, inner, 16);
  fg_md2_final(c, mac);
}

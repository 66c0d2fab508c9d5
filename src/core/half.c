/* IEEE binary16 and bfloat16 conversions (scalar; bit-exact round-to-nearest-even). */
#include <string.h>

#include "tessera/core.h"

static inline uint32_t f2u(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline float u2f(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

uint16_t ts_f32_to_f16(float x) {
  uint32_t u = f2u(x);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t exp = (u >> 23) & 0xffu;
  uint32_t man = u & 0x7fffffu;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
  int32_t e = (int32_t)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign; /* rounds to zero */
    man |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t h = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (man >> 13);
  uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++; /* may carry into exponent: correct */
  return (uint16_t)(sign | h);
}

float ts_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    if (man == 0) return u2f(sign);
    /* subnormal: value = man * 2^-24 */
    float v = (float)man * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return u2f(sign | 0x7f800000u | (man << 13));
  return u2f(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

uint16_t ts_f32_to_bf16(float x) {
  uint32_t u = f2u(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return (uint16_t)(u >> 16);
}

float ts_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

void ts_f32_to_f16_array(const float *x, uint16_t *y, size_t n) { for (size_t i = 0; i < n; i++) y[i] = ts_f32_to_f16(x[i]); }
void ts_f16_to_f32_array(const uint16_t *x, float *y, size_t n) { for (size_t i = 0; i < n; i++) y[i] = ts_f16_to_f32(x[i]); }
void ts_f32_to_bf16_array(const float *x, uint16_t *y, size_t n) { for (size_t i = 0; i < n; i++) y[i] = ts_f32_to_bf16(x[i]); }
void ts_bf16_to_f32_array(const uint16_t *x, float *y, size_t n) { for (size_t i = 0; i < n; i++) y[i] = ts_bf16_to_f32(x[i]); }

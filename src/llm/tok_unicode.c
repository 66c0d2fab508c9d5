/* The Unicode classes the pre-tokenizer needs, and GPT-2's byte <-> code point map. */
#include "llm/tok_internal.h"

static bool in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp) {
  size_t lo = 0, hi = n;
  while (lo < hi) { /* first range whose last >= cp */
    size_t mid = lo + (hi - lo) / 2;
    if (r[mid][1] < cp) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && r[lo][0] <= cp;
}

bool ts__is_letter(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return in_ranges(ts__unicode_letters, ts__unicode_letters_count, cp);
}

bool ts__is_number(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(ts__unicode_numbers, ts__unicode_numbers_count, cp);
}

/* The Unicode White_Space property (what \s matches in the pre-tokenizer's pattern). */
bool ts__is_space(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

static bool byte_is_self(unsigned b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t ts__byte_to_cp(uint8_t b) {
  if (byte_is_self(b)) return b;
  uint32_t n = 0; /* rank of b among the bytes that are not their own code point */
  for (unsigned i = 0; i < b; i++) n += !byte_is_self(i);
  return 256 + n;
}

int ts__cp_to_byte(uint32_t cp) {
  if (cp < 256) return byte_is_self(cp) ? (int)cp : -1;
  if (cp >= 256 + 68) return -1;
  uint32_t n = cp - 256;
  for (unsigned b = 0; b < 256; b++)
    if (!byte_is_self(b) && n-- == 0) return (int)b;
  return -1;
}

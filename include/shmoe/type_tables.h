/* The OpenSHMEM type tables. Every typed family of the API is declared (in shmem.h) and defined
 * (in the library) by applying one of these X-macros, so a family is written once and each type
 * is stamped out from the table, never copied by hand. X(TYPE, TYPENAME) as in the specification.
 */
#ifndef SHMOE_TYPE_TABLES_H
#define SHMOE_TYPE_TABLES_H

#include <stddef.h>
#include <stdint.h>

/* Table 5 of OpenSHMEM 1.5: standard RMA types. */
#define SHMOE_RMA_TYPES(X)         \
  X(float, float)                  \
  X(double, double)                \
  X(long double, longdouble)       \
  X(char, char)                    \
  X(signed char, schar)            \
  X(short, short)                  \
  X(int, int)                      \
  X(long, long)                    \
  X(long long, longlong)           \
  X(unsigned char, uchar)          \
  X(unsigned short, ushort)        \
  X(unsigned int, uint)            \
  X(unsigned long, ulong)          \
  X(unsigned long long, ulonglong) \
  X(int8_t, int8)                  \
  X(int16_t, int16)                \
  X(int32_t, int32)                \
  X(int64_t, int64)                \
  X(uint8_t, uint8)                \
  X(uint16_t, uint16)              \
  X(uint32_t, uint32)              \
  X(uint64_t, uint64)              \
  X(size_t, size)                  \
  X(ptrdiff_t, ptrdiff)

/* The sized RMA forms: X(BITS, C type of that width). */
#define SHMOE_RMA_SIZES(X) \
  X(8, uint8_t) X(16, uint16_t) X(32, uint32_t) X(64, uint64_t) X(128, shmoe_u128_t)

/* Table 6: standard AMO types (all atomic operations). */
#define SHMOE_AMO_STANDARD_TYPES(X) \
  X(int, int)                       \
  X(long, long)                     \
  X(long long, longlong)            \
  X(unsigned int, uint)             \
  X(unsigned long, ulong)           \
  X(unsigned long long, ulonglong)  \
  X(int32_t, int32)                 \
  X(int64_t, int64)                 \
  X(uint32_t, uint32)               \
  X(uint64_t, uint64)               \
  X(size_t, size)                   \
  X(ptrdiff_t, ptrdiff)

/* Table 7: extended AMO types (fetch, set, swap): the standard ones and the floating types. */
#define SHMOE_AMO_EXTENDED_TYPES(X) \
  X(float, float)                   \
  X(double, double)                 \
  SHMOE_AMO_STANDARD_TYPES(X)

/* Table 8: bitwise AMO types (and, or, xor). */
#define SHMOE_AMO_BITWISE_TYPES(X) \
  X(unsigned int, uint)            \
  X(unsigned long, ulong)          \
  X(unsigned long long, ulonglong) \
  X(int32_t, int32)                \
  X(int64_t, int64)                \
  X(uint32_t, uint32)              \
  X(uint64_t, uint64)

/* Point-to-point synchronization types (wait_until, test and their _all/_any/_some/_vector
 * forms): short, unsigned short (deprecated by 1.5, still in its table) and the standard AMO
 * types. */
#define SHMOE_P2P_SYNC_TYPES(X) \
  X(short, short)               \
  X(unsigned short, ushort)     \
  SHMOE_AMO_STANDARD_TYPES(X)

/* A 16-byte element for shmem_put128 and friends (the specification moves 128-bit units). */
typedef struct {
  uint64_t lo, hi;
} shmoe_u128_t;

#endif

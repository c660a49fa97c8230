/* Type tables for the collective, deprecated and type-generic parts of shmem.h, in the style of
 * shmoe/type_tables.h: X(TYPE, TYPENAME). Each family is declared and defined once and stamped
 * out from these tables.
 */
#ifndef SHMOE_COLLECTIVE_TYPES_H
#define SHMOE_COLLECTIVE_TYPES_H

#include "shmoe/type_tables.h"

/* Complex types of the SUM/PROD reductions (GCC and Clang accept _Complex in C++ too). */
typedef float _Complex shmoe_complexf_t;
typedef double _Complex shmoe_complexd_t;

/* OpenSHMEM 1.5 Table 10 (reduction types): AND, OR, XOR. */
#define SHMOE_REDUCE_BITWISE_TYPES(X) \
  X(unsigned char, uchar)             \
  X(unsigned short, ushort)           \
  X(unsigned int, uint)               \
  X(unsigned long, ulong)             \
  X(unsigned long long, ulonglong)    \
  X(int8_t, int8)                     \
  X(int16_t, int16)                   \
  X(int32_t, int32)                   \
  X(int64_t, int64)                   \
  X(uint8_t, uint8)                   \
  X(uint16_t, uint16)                 \
  X(uint32_t, uint32)                 \
  X(uint64_t, uint64)                 \
  X(size_t, size)

/* MAX, MIN: the integer and floating types. */
#define SHMOE_REDUCE_MINMAX_TYPES(X) \
  X(char, char)                      \
  X(signed char, schar)              \
  X(short, short)                    \
  X(int, int)                        \
  X(long, long)                      \
  X(long long, longlong)             \
  X(ptrdiff_t, ptrdiff)              \
  SHMOE_REDUCE_BITWISE_TYPES(X)      \
  X(float, float)                    \
  X(double, double)                  \
  X(long double, longdouble)

/* SUM, PROD: the MAX/MIN types and the complex ones. */
#define SHMOE_REDUCE_ARITH_TYPES(X) \
  SHMOE_REDUCE_MINMAX_TYPES(X)      \
  X(shmoe_complexd_t, complexd)     \
  X(shmoe_complexf_t, complexf)

/* The deprecated active-set reductions, shmem_TYPENAME_OP_to_all. */
#define SHMOE_TO_ALL_BITWISE_TYPES(X) \
  X(short, short)                     \
  X(int, int)                         \
  X(long, long)                       \
  X(long long, longlong)
#define SHMOE_TO_ALL_MINMAX_TYPES(X) \
  SHMOE_TO_ALL_BITWISE_TYPES(X)      \
  X(float, float)                    \
  X(double, double)                  \
  X(long double, longdouble)
#define SHMOE_TO_ALL_ARITH_TYPES(X) \
  SHMOE_TO_ALL_MINMAX_TYPES(X)      \
  X(shmoe_complexd_t, complexd)     \
  X(shmoe_complexf_t, complexf)

/* The atomic names before OpenSHMEM 1.4 (cswap, fadd, finc, add, inc; fetch, set, swap). */
#define SHMOE_DEPRECATED_AMO_TYPES(X) \
  X(int, int)                         \
  X(long, long)                       \
  X(long long, longlong)
#define SHMOE_DEPRECATED_AMO_EXTENDED_TYPES(X) \
  SHMOE_DEPRECATED_AMO_TYPES(X)                \
  X(float, float)                              \
  X(double, double)
/* shmem_TYPENAME_wait (deprecated since 1.4). */
#define SHMOE_DEPRECATED_WAIT_TYPES(X) \
  X(short, short)                      \
  X(int, int)                          \
  X(long, long)                        \
  X(long long, longlong)

/* The type-generic interface selects on distinct C types only: a C11 _Generic list (or a C++
 * overload set) may not name one type twice, and the fixed-width and size types of the tables
 * above are typedefs of the basic ones (on LP64: int32_t is int, int64_t is long, uint64_t and
 * size_t are unsigned long, ptrdiff_t is long). Each list below is its specification table
 * reduced to distinct types; a fixed-width type that is the only signed entry of a table is
 * named by its own typedef, so it selects whatever basic type it is on the platform. */

/* Standard AMO types (Table 6). */
#define SHMOE_GENERIC_INT_TYPES(X) \
  X(int, int)                      \
  X(long, long)                    \
  X(long long, longlong)           \
  X(unsigned int, uint)            \
  X(unsigned long, ulong)          \
  X(unsigned long long, ulonglong)
/* Extended AMO types (Table 7). */
#define SHMOE_GENERIC_AMO_EXTENDED_TYPES(X) \
  X(float, float)                           \
  X(double, double)                         \
  SHMOE_GENERIC_INT_TYPES(X)
/* Bitwise AMO types (Table 8): unsigned int, unsigned long, unsigned long long, int32_t,
 * int64_t (uint32_t and uint64_t are among the unsigned ones). */
#define SHMOE_GENERIC_BITWISE_TYPES(X) \
  X(unsigned int, uint)                \
  X(unsigned long, ulong)              \
  X(unsigned long long, ulonglong)     \
  X(int32_t, int32)                    \
  X(int64_t, int64)
/* Point-to-point synchronization types: short, unsigned short and the standard AMO types. */
#define SHMOE_GENERIC_P2P_TYPES(X) \
  X(short, short)                  \
  X(unsigned short, ushort)        \
  SHMOE_GENERIC_INT_TYPES(X)
/* Standard RMA types (Table 5); the team collectives (broadcast, collect, alltoall) too. */
#define SHMOE_GENERIC_RMA_TYPES(X) \
  X(float, float)                  \
  X(double, double)                \
  X(long double, longdouble)       \
  X(char, char)                    \
  X(signed char, schar)            \
  X(short, short)                  \
  X(unsigned char, uchar)          \
  X(unsigned short, ushort)        \
  SHMOE_GENERIC_INT_TYPES(X)
/* AND, OR, XOR reductions: the unsigned types and int8_t .. int64_t (Table 10). */
#define SHMOE_GENERIC_REDUCE_BITWISE_TYPES(X) \
  X(unsigned char, uchar)                     \
  X(unsigned short, ushort)                   \
  X(unsigned int, uint)                       \
  X(unsigned long, ulong)                     \
  X(unsigned long long, ulonglong)            \
  X(int8_t, int8)                             \
  X(int16_t, int16)                           \
  X(int32_t, int32)                           \
  X(int64_t, int64)
/* MAX, MIN: every integer and floating type of Table 10. */
#define SHMOE_GENERIC_REDUCE_MINMAX_TYPES(X) \
  X(char, char)                              \
  X(signed char, schar)                      \
  X(short, short)                            \
  X(int, int)                                \
  X(long, long)                              \
  X(long long, longlong)                     \
  X(unsigned char, uchar)                    \
  X(unsigned short, ushort)                  \
  X(unsigned int, uint)                      \
  X(unsigned long, ulong)                    \
  X(unsigned long long, ulonglong)           \
  X(float, float)                            \
  X(double, double)                          \
  X(long double, longdouble)
/* SUM, PROD: the MAX/MIN types and the complex ones. */
#define SHMOE_GENERIC_REDUCE_ARITH_TYPES(X) \
  SHMOE_GENERIC_REDUCE_MINMAX_TYPES(X)      \
  X(shmoe_complexd_t, complexd)             \
  X(shmoe_complexf_t, complexf)

#endif

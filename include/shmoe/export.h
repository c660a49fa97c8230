/* SHMOE_API marks a declaration of the installed interface: libshmoe.so is built with hidden
 * visibility and exports what carries this mark (and the OpenSHMEM functions of shmem.h).
 */
#ifndef SHMOE_EXPORT_H
#define SHMOE_EXPORT_H

#if defined(__GNUC__)
#define SHMOE_API __attribute__((visibility("default")))
#else
#define SHMOE_API
#endif

#endif /* SHMOE_EXPORT_H */

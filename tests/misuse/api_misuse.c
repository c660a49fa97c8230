/* OpenSHMEM calls used wrongly, one per mode (api_misuse MODE): each must end in a clear error
 * naming the call and the value, or in the specification's error value with a warning that says
 * why, never in a crash or a hang. api_misuse.sh checks the messages and statuses. */
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

long lock; /* the usual global lock */

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  shmem_init();
  const int me = shmem_my_pe(), n = shmem_n_pes();
  long* word = shmem_calloc(4, sizeof(long));
  if (strcmp(mode, "null_source") == 0) {
    shmem_long_put(word, NULL, 4, (me + 1) % n);
  } else if (strcmp(mode, "null_dest_get") == 0) {
    shmem_long_get(NULL, word, 2, 0);
  } else if (strcmp(mode, "garbage_team") == 0) {
    shmem_team_t team = SHMEM_TEAM_INVALID;
    int status = shmem_team_split_strided((shmem_team_t)(uintptr_t)0x1234, 0, 1, 1, NULL, 0, &team);
    printf("PE %d: split=%d invalid=%d n_pes=%d\n", me, status, team == SHMEM_TEAM_INVALID,
           shmem_team_n_pes((shmem_team_t)(uintptr_t)0x5678));
  } else if (strcmp(mode, "split_mismatch") == 0) {
    /* PE 0 asks for every second PE, the others for the first two. */
    shmem_team_t team = SHMEM_TEAM_INVALID;
    int status = me == 0 ? shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, 2, NULL, 0, &team)
                         : shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, 2, NULL, 0, &team);
    printf("PE %d: split=%d invalid=%d\n", me, status, team == SHMEM_TEAM_INVALID);
  } else if (strcmp(mode, "bad_split") == 0) {
    /* Only the last PE passes a start outside the parent: every PE must return, none may hang. */
    shmem_team_t team = SHMEM_TEAM_INVALID;
    int status = shmem_team_split_strided(SHMEM_TEAM_WORLD, me == n - 1 ? n + 2 : 0, 1, 1, NULL,
                                          0, &team);
    printf("PE %d: split=%d invalid=%d\n", me, status, team == SHMEM_TEAM_INVALID);
    /* The job goes on: a valid split afterwards works everywhere. */
    status = shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n, NULL, 0, &team);
    printf("PE %d: then split=%d size=%d\n", me, status, shmem_team_n_pes(team));
  } else if (strcmp(mode, "calloc_overflow") == 0) {
    void* p = shmem_calloc(SIZE_MAX / 2, 4);
    printf("PE %d: calloc=%s\n", me, p == NULL ? "NULL" : "not NULL");
  } else if (strcmp(mode, "clear_unheld") == 0) {
    shmem_clear_lock(&lock);
  } else if (strcmp(mode, "set_twice") == 0) {
    if (me == 0) {
      shmem_set_lock(&lock);
      shmem_set_lock(&lock);
    }
  } else if (strcmp(mode, "clear_by_other") == 0) {
    if (me == 0) shmem_set_lock(&lock);
    shmem_barrier_all();
    if (me == 1) shmem_clear_lock(&lock);
  } else if (strcmp(mode, "lock_ok") == 0) { /* the correct use still works */
    for (int i = 0; i < 10; ++i) {
      shmem_set_lock(&lock);
      shmem_long_atomic_inc(word, 0);
      shmem_clear_lock(&lock);
    }
    while (shmem_test_lock(&lock) != 0) {
    }
    shmem_clear_lock(&lock);
    shmem_barrier_all();
    if (me == 0) printf("PE 0: count=%ld want=%d\n", *word, 10 * n);
  }
  shmem_barrier_all();
  shmem_finalize();
  return 0;
}

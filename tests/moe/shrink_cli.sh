#!/usr/bin/env bash
# shmoe-moe's shrink mode with a PE that really fails in the middle of MoE traffic: PE FAIL quits
# (stops calling), is stopped by SIGSTOP, or is killed by SIGKILL at iteration 1 of 4; every other
# PE must mask it within the bound plus one second and pass its checks against a reference
# without FAIL's experts. A stopped PE is resumed, every PE rejoins, and one more iteration is
# exact with every PE live on every PE (status 0). A killed PE is lost (shmoe-moe runs the job
# with SHMOE_PE_LOSS=continue): the others go on, their teardown (shmem_free, finalize) runs over
# the live PEs, and they end with status 0; so does the job, whose last line names PE FAIL as
# lost.
# With SHMOERUN and PER_HOST, the job runs as simulated hosts of PER_HOST PEs each (shmoerun
# starts each PE through tests/pe/fake_hosts.sh): shared memory inside a host, UCX between.
# FAIL may name several PEs, P,Q,... (quit or kill: e.g. every PE of one simulated host).
# With PLANE doubleplane, the pipeline runs the two-data-plane operators, every segment above
# the average through the copy engine (each survivor must have moved bytes through it).
#   shrink_cli.sh SHMOE_MOE PES FAIL quit|stop|kill [SHMOERUN PER_HOST [PLANE]]
set -euo pipefail
moe=$1 pes=$2 fail=$3 how=$4
IFS=, read -ra fails <<<"$fail"
survivors=$((pes - ${#fails[@]}))
bound=2000
expected_status=0
status=0
run=("$moe") launcher=shmoe-moe
plane=()
[[ ${7:-} == doubleplane ]] && plane=(--doubleplane --threshold 0)
if [[ $# -ge 6 ]]; then
  # shmoe-moe as one PE of shmoerun's job (SHMOE_MOE_PE), which sets no loss policy itself.
  run=("$5" -n "$pes" --timeout 120 "$(dirname "$0")/../pe/fake_hosts.sh" "$6" "$moe")
  launcher=shmoerun
  export SHMOE_MOE_PE=1 SHMEM_SYMMETRIC_SIZE=${SHMEM_SYMMETRIC_SIZE:-64M}
  [[ $how == kill ]] && export SHMOE_PE_LOSS=continue
fi
log=$("${run[@]}" pipeline --pes "$pes" --bs 32 --hidden 1024 --topk 4 --experts-per-pe 2 \
  --dtype bfloat16 --iterations 4 --shrink-ms $bound --fail-pe "$fail:$how:1" --timeout 120 \
  "${plane[@]}" 2>&1) || status=$?
if [[ $status -ne $expected_status ]]; then
  echo "$log"
  echo "FAIL: the run ended with status $status, expected $expected_status"
  exit 1
fi
echo "$log" | grep -E "^(PE [0-9]+:|$launcher: |shmoe: PE [0-9]+: warning: shrink mode)" || true
passed=$(grep -cE "^PE [0-9]+: pipeline(-doubleplane)? verify=pass" <<<"$log" || true)
if [[ $passed -ne $survivors ]]; then
  echo "FAIL: $passed PEs passed their checks, expected $survivors"
  exit 1
fi
if [[ $how == kill ]]; then
  if grep -E "error" <<<"$log"; then
    echo "FAIL: an error above, where the survivors should end cleanly"
    exit 1
  fi
  last=$(tail -n 1 <<<"$log")
  grep -qE "^$launcher: done without ${#fails[@]} of $pes PEs \(SHMOE_PE_LOSS=continue\): the other $survivors ended with status 0; lost: " <<<"$last" ||
    { echo "FAIL: the last line does not say the job is done without PEs $fail: $last"; exit 1; }
fi
for f in "${fails[@]}"; do
  if [[ $how == kill ]]; then
    # The launcher says what it saw when it reaped the PE: the survivors end within ~100 ms of
    # the kill, and may be reaped first (seen with the whole second host killed).
    grep -qE "^$launcher: PE $f \(pid [0-9]+\) was killed by signal 9 \(Killed\); SHMOE_PE_LOSS=continue: (the others go on|no other PE was still running)$" <<<"$log" ||
      { echo "FAIL: the launcher did not say that PE $f was killed (SHMOE_PE_LOSS=continue)"; exit 1; }
    grep -qE "lost: (.*; )?PE $f \(pid [0-9]+\) was killed by signal 9 \(Killed\)(;|$)" <<<"$last" ||
      { echo "FAIL: the last line does not name PE $f as lost: $last"; exit 1; }
  else
    grep -q "^PE $f: failed on purpose: " <<<"$log" || { echo "FAIL: PE $f did not fail"; exit 1; }
  fi
  grep -q "warning: shrink mode: PE $f masked" <<<"$log" || { echo "FAIL: no PE masked PE $f"; exit 1; }
done
# Each survivor's line: masked=[FAIL] (its last such: the PEs masked by then) from call 2 (iteration 1; call 3, iteration 2 when the stop
# or kill lands after the iteration's last wait) within MS ms.
calls=()
while read -r line; do
  ms=$(sed -n "s/.* masked=\[$fail\] from call [23] (iteration [12]) within \([0-9]*\) ms.*/\1/p" <<<"$line")
  if [[ -z $ms ]]; then
    echo "FAIL: a survivor did not mask PE $fail: $line"
    exit 1
  fi
  read -r call it < <(sed -n "s/.* masked=\[$fail\] from call \([0-9]*\) (iteration \([0-9]*\)).*/\1 \2/p" <<<"$line")
  if ((call != it + 1)); then
    echo "FAIL: call $call for iteration $it: $line"
    exit 1
  fi
  calls+=("$call")
  if [[ ${#plane[@]} -gt 0 ]] && ! grep -qE " copy_engine_bytes=[1-9]" <<<"$line"; then
    echo "FAIL: the copy engine moved nothing: $line"
    exit 1
  fi
  if ((ms > bound + 1000)); then
    echo "FAIL: masking took $ms ms, more than the bound $bound ms plus one second"
    exit 1
  fi
done < <(grep -E "^PE [0-9]+: pipeline(-doubleplane)? verify=pass" <<<"$log")
# The library's warnings, one per survivor ("shmoe: PE R: warning: shrink mode: PE FAIL masked: it
# did not reach STEP of call N within BOUND ms", or "masked at STEP of call N: it was lost ..."
# for a killed PE; the launcher merges the same line of several PEs into one, "(the same on K
# more PEs)"), number the same calls: call N is the first call without FAIL, or N + 1 when STEP
# is a combine's last, "combine reads" (the call completed with FAIL's rows). With several PEs
# failing, each may be masked at another call: this holds for one.
if [[ ${#fails[@]} -gt 1 ]]; then
  echo "ok: PEs $fail ($how) masked by the $survivors others, all exact (status $status)"
  exit 0
fi
from_warnings=$(sed -n "s/^shmoe: PE [0-9]*: warning: shrink mode: PE $fail masked\(: it did not reach\| at\) \(.*\) of call \([0-9]*\)\( within \|: \).*/\2|\3|&/p" <<<"$log" |
  while IFS='|' read -r step n line; do
    more=$(sed -n 's/.*(the same on \([0-9]*\) more PEs\?)$/\1/p' <<<"$line")
    [[ $step == "combine reads" ]] && n=$((n + 1))
    for ((k = 0; k <= ${more:-0}; ++k)); do echo "$n"; done
  done | sort | tr '\n' ' ')
from_lines=$(printf '%s\n' "${calls[@]}" | sort | tr '\n' ' ')
if [[ $from_warnings != "$from_lines" ]]; then
  echo "FAIL: the survivors' lines leave PE $fail out from calls [$from_lines], their mask warnings say [$from_warnings]:"
  grep "warning: shrink mode: PE $fail masked" <<<"$log"
  exit 1
fi
echo "ok: the mask warnings and the survivors' lines name the same calls [$from_lines]"
if [[ $how == stop ]]; then
  rejoined=$(grep -c "rejoined: every PE live" <<<"$log" || true)
  if [[ $rejoined -ne $((pes - 1)) ]] || ! grep -q "^PE $fail: .*rejoined: verify=pass" <<<"$log"; then
    echo "FAIL: not every PE rejoined and passed its last iteration"
    exit 1
  fi
fi
echo "ok: PE $fail ($how) masked by the $survivors others, all exact (status $status)"

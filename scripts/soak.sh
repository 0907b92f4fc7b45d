#!/usr/bin/env bash
# Unattended-use soak: N short `stampede test` runs in a row on one local cluster; in some of
# them the controller is killed (SIGKILL or SIGINT) at a random moment, the run, the signal
# and the moment all chosen by a seed. A run right after a kill is never killed, and must be
# valid with no `stampede heal` by hand; so must every run not killed. At the end the cluster
# is taken down and the machine checked for anything left.
#
#   scripts/soak.sh [N=30] [SEED=1]        (as root; builds stampede first)
#
# Prints one line per run and a summary: runs, kills by signal, the phases the kills hit,
# valid runs after a kill, and leftovers. Exits 1 if any run that had to be valid was not, or
# anything was left. Environment: SOAK_CLUSTER (default `soak`), SOAK_NODES (3), SOAK_KILL_WITHIN
# (seconds after a run's start within which a kill lands; default 45).
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-30}
seed=${2:-1}
cluster=${SOAK_CLUSTER:-soak}
nodes=${SOAK_NODES:-3}
within=${SOAK_KILL_WITHIN:-45}
cargo build --release --quiet || exit 2
stampede=$PWD/target/release/stampede
work=$(mktemp -d /tmp/stampede-soak.XXXXXX)
export STAMPEDE_CLUSTER=$cluster
"$stampede" cluster up --nodes "$nodes" >/dev/null || exit 2
subnet=$(python3 -c "import json;print('.'.join(map(str,json.load(open('/var/lib/stampede/clusters/$cluster/cluster.json'))['subnet'])))")

RANDOM=$seed
kills=0 sigkills=0 sigints=0 must_valid=0 valid=0 after_kill=0 valid_after_kill=0 failed=0
declare -A phases=()
previous_killed=0
printf '%-4s %-8s %-8s %-10s %s\n' run signal at_s phase outcome
for i in $(seq "$runs"); do
  log=$work/run-$i.log
  signal=none
  if [ "$previous_killed" = 0 ] && [ $((RANDOM % 3)) -lt 2 ]; then
    if [ $((RANDOM % 2)) = 0 ]; then signal=KILL; else signal=INT; fi
    at_ms=$(( (RANDOM * 32768 + RANDOM) % (within * 1000) ))
  fi
  ( cd "$work" && exec "$stampede" test --time-limit 6s \
      --set generator.nemesis_interval=1s --set generator.nemesis_duration=2s ) >"$log" 2>&1 &
  pid=$!
  phase=-
  if [ "$signal" != none ]; then
    sleep "$(printf '%d.%03d' $((at_ms / 1000)) $((at_ms % 1000)))"
    if kill -0 "$pid" 2>/dev/null; then
      # The phase the run was in: its last progress line (a line at each phase change).
      phase=$(grep -o '^progress: [a-z]*' "$log" | tail -1 | cut -d' ' -f2)
      phase=${phase:-preflight}
      kill -"$signal" "$pid"
    else
      signal=none # it ended first
    fi
  fi
  wait "$pid" 2>/dev/null
  code=$?
  if [ "$signal" = none ]; then
    must_valid=$((must_valid + 1))
    verdict=$(grep '^verdict: ' "$log" | tail -1)
    if [ "$code" = 0 ] && [[ "$verdict" == "verdict: valid under"* ]]; then
      valid=$((valid + 1))
      outcome=valid
      if [ "$previous_killed" = 1 ]; then valid_after_kill=$((valid_after_kill + 1)); fi
    else
      failed=$((failed + 1))
      outcome="NOT VALID (exit $code; log $log)"
    fi
    found=$(grep -o 'found what an earlier run left, and removed it: .*' "$log" | cut -c49-)
    [ -n "$found" ] && outcome="$outcome; cleared: $found"
    [ "$previous_killed" = 1 ] && after_kill=$((after_kill + 1))
    previous_killed=0
    printf '%-4s %-8s %-8s %-10s %s\n' "$i" - - - "$outcome"
  else
    kills=$((kills + 1))
    [ "$signal" = KILL ] && sigkills=$((sigkills + 1)) || sigints=$((sigints + 1))
    phases[$phase]=$(( ${phases[$phase]:-0} + 1 ))
    previous_killed=1
    printf '%-4s %-8s %-8s %-10s %s\n' "$i" "SIG$signal" "$((at_ms / 1000)).$(( at_ms % 1000 / 100 ))" "$phase" "exit $code: $(tail -1 "$log" | cut -c1-160)"
  fi
done
# A kill in the last run is followed by one more run, so that every kill is judged after.
if [ "$previous_killed" = 1 ]; then
  log=$work/run-final.log
  ( cd "$work" && exec "$stampede" test --time-limit 6s \
      --set generator.nemesis_interval=1s --set generator.nemesis_duration=2s ) >"$log" 2>&1
  code=$?
  after_kill=$((after_kill + 1)); must_valid=$((must_valid + 1))
  if [ "$code" = 0 ]; then valid=$((valid + 1)); valid_after_kill=$((valid_after_kill + 1)); else failed=$((failed + 1)); fi
  echo "final run after the last kill: exit $code"
fi

"$stampede" cluster down >/dev/null
left=""
pgrep -f "QuorumPeerMain /var/lib/stampede/db/$subnet\." >/dev/null && left="$left servers"
ls /var/lib/stampede/locks/"$subnet".*.lock >/dev/null 2>&1 && left="$left locks"
ls -d /var/lib/stampede/db/"$subnet".* >/dev/null 2>&1 && left="$left server-dirs"
ip netns list | grep -q "^$cluster-" && left="$left namespaces"
[ -d "/var/lib/stampede/clusters/$cluster" ] && left="$left cluster-state"

phase_list=""
for p in "${!phases[@]}"; do phase_list="$phase_list $p=${phases[$p]}"; done
echo "soak: seed $seed, $runs runs, $kills kills (SIGKILL $sigkills, SIGINT $sigints), phases hit:${phase_list:- none}"
echo "soak: valid $valid of $must_valid runs that had to be; after a kill: $valid_after_kill of $after_kill valid; left on the machine:${left:- nothing}"
echo "soak: logs in $work"
if [ "$failed" -gt 0 ] || [ -n "$left" ]; then exit 1; fi

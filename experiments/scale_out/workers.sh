#!/usr/bin/env bash
# Measures the wall time of one toy Optuna search (6 trials, study on PostgreSQL) run by 1 worker
# and by 2 workers started together, and prints each study's trials and trial folders.
#   bash experiments/scale_out/workers.sh [n_trials] [out dir] [steps per epoch] [epochs]
# Starts its own PostgreSQL server (Debian's postgresql) in a temporary folder, socket only.
set -euo pipefail
cd "$(dirname "$0")/../.."
n_trials=${1:-6}
out=${2:-$(mktemp -d /tmp/scale-out-XXXX)}
steps=${3:-3}
epochs=${4:-1}
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
pg=$(mktemp -d /tmp/scale-out-pg-XXXX)
as_server=()
if [ "$(id -u)" = 0 ]; then chown nobody "$pg"; as_server=(runuser -u nobody --); fi
"${as_server[@]}" "$bin/initdb" -D "$pg/data" -U postgres --auth=trust >/dev/null
"${as_server[@]}" "$bin/pg_ctl" -D "$pg/data" -l "$pg/log" -o "-k $pg -c listen_addresses=''" -w start >/dev/null
trap '"${as_server[@]}" "$bin/pg_ctl" -D "$pg/data" -m immediate -w stop >/dev/null; rm -rf "$pg"' EXIT

# The toy search of tests/training/test_sweep_workers.py: the learning rate searched on a tiny
# model, 3 steps a trial (or `steps` x `epochs`), each valued by its last val/loss.
search=(experiment=toy logger=none '~callbacks.attention_maps' '~callbacks.translation_table'
  callbacks.checkpoints.every_minutes=null trainer.max_epochs=$epochs
  +trainer.limit_train_batches=$steps
  data.corpus.num_val=8 hparams_search=multi30k_de_en data.vocab_size=512 data.max_tokens=1024
  module.warmup_steps=50 module.label_smoothing=0.1 model.dropout=0.1 model.attention_dropout=0.0
  model.activation_dropout=0.0 model.N=1 model.d_model=64 model.d_ff=128 model.h=4
  model.tie_embeddings=all optimized_metric=val/loss optimized_direction=minimize
  "paths.cache_dir=$out/cache")

# The toy corpus and its tokenizer, prepared once so that neither timing includes them.
OMP_NUM_THREADS=1 python train.py "${search[@]}" hydra.sweeper.n_trials=1 \
  "hydra.sweeper.storage=null" "paths.log_dir=$out/warmup" -m >/dev/null 2>&1

for workers in 1 2; do
  "$bin/createdb" -h "$pg" -U postgres "workers$workers"
  url="postgresql://postgres@/workers$workers?host=$pg"
  start=$(date +%s.%N)
  for i in $(seq "$workers"); do
    OMP_NUM_THREADS=1 python train.py -m "${search[@]}" "hydra.sweeper.n_trials=$n_trials" \
      "hydra.sweeper.storage='$url'" \
      "paths.log_dir=$out/$workers" >"$out/worker$workers-$i.log" 2>&1 &
  done
  wait
  end=$(date +%s.%N)
  python - "$url" "$out/$workers/toy/sweeps/multi30k_de_en" "$workers" "$start" "$end" <<'PY'
import sys
from pathlib import Path
import optuna
url, sweep, workers, start, end = sys.argv[1:]
optuna.logging.set_verbosity(optuna.logging.WARNING)
trials = optuna.load_study(study_name="multi30k_de_en", storage=url).trials
states = [t.state.name for t in trials]
folders = sorted(int(p.name) for p in Path(sweep).iterdir() if p.name.isdigit())
owners = {t.user_attrs["worker"] for t in trials}
print(f"| {workers} | {float(end) - float(start):.0f} | {states.count('COMPLETE')} complete, "
      f"{len(trials) - states.count('COMPLETE')} other | {folders} | {len(owners)} |")
PY
done

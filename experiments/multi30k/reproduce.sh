#!/usr/bin/env bash
# The whole record from the repository root: train each direction for an hour, decode val with
# every candidate setting, then score test_2016_flickr once with the settings val chose.
#   NMT_DATA_DIR=../shared/data bash experiments/multi30k/reproduce.sh [train] [val] [test]
set -euo pipefail
data=${NMT_DATA_DIR:?point NMT_DATA_DIR at the folder holding multi30k/}/multi30k
stages=${*:-train val test}
# Chosen on val (experiments/multi30k_sweep/README.md): the checkpoints to average (the last 5
# were best for en->de's cool-down and de->en's R-Drop) and the beam's alpha (GNMT form; beam
# output is short, and a large alpha lengthens it).
average=5
alpha=2.0

evaluate() {  # <split> <name> <checkpoint arguments and search options...>, of $pair in $run
  local split=$1 name=$2
  shift 2
  nmt-evaluate "$@" --src "$data/$split.${pair%_*}.gz" --ref "$data/$split.${pair#*_}.gz" \
    --output-dir "$run/evaluation/$split/$name" | grep '^[A-Za-z0-9-]*: ' | sed "s|^|$pair $split $name |"
}

grid() {  # <name> <checkpoint arguments and several search options...>: val's table, each
  local name=$1  # setting's report in $run/evaluation/val/<name>/<setting>/
  shift
  echo "$pair val $name"
  nmt-evaluate "$@" --src "$data/val.${pair%_*}.gz" --ref "$data/val.${pair#*_}.gz" \
    --output-dir "$run/evaluation/val/$name" | grep '^|'
}

for pair in de_en en_de; do
  run=outputs/multi30k_$pair/final
  [[ $stages == *train* ]] && python train.py experiment=multi30k_$pair hydra.run.dir=$run
  best=$(ls "$run"/checkpoints/step*-bleu*.ckpt)
  if [[ $stages == *val* ]]; then
    grid best "$best" --beam-size 1 4
    grid averages "$run/checkpoints" --average-last 3 5 10 --beam-size 1 4
    grid alpha "$run/checkpoints" --average-last $average --alpha 0.2 1.0 1.3 1.6 2.0 2.5 3.0
    grid alpha_beam6 "$run/checkpoints" --average-last $average --beam-size 6 --alpha 1.3 2.0
  fi
  if [[ $stages == *test* ]]; then
    for beam in 1 4; do
      evaluate test_2016_flickr best_beam$beam "$best" --beam-size $beam --alpha $alpha
      evaluate test_2016_flickr avg${average}_beam$beam "$run/checkpoints" \
        --average-last $average --beam-size $beam --alpha $alpha
    done
  fi
done

#!/usr/bin/env bash
# The whole record from the repository root: train each direction for an hour, decode val with
# every candidate setting, then score test_2016_flickr once with the settings val chose.
#   NMT_DATA_DIR=../shared/data bash experiments/multi30k/reproduce.sh [train] [val] [test]
set -euo pipefail
data=${NMT_DATA_DIR:?point NMT_DATA_DIR at the folder holding multi30k/}/multi30k
stages=${*:-train val test}
# Chosen on val (experiments/multi30k_sweep/README.md): the checkpoints to average per direction
# (en->de's cool-down leaves the last ones best) and the beam's alpha (GNMT form; beam output is
# short, and a large alpha lengthens it).
declare -A averages=([de_en]=10 [en_de]=5)
alpha=2.0

evaluate() {  # <split> <name> <checkpoint arguments and search options...>, of $pair in $run
  local split=$1 name=$2
  shift 2
  nmt-evaluate "$@" --src "$data/$split.${pair%_*}.gz" --ref "$data/$split.${pair#*_}.gz" \
    --output-dir "$run/evaluation/$split/$name" | grep '^[A-Za-z0-9-]*: ' | sed "s|^|$pair $split $name |"
}

for pair in de_en en_de; do
  run=outputs/multi30k_$pair/final
  [[ $stages == *train* ]] && python train.py experiment=multi30k_$pair hydra.run.dir=$run
  best=$(ls "$run"/checkpoints/step*-bleu*.ckpt)
  average=${averages[$pair]}
  if [[ $stages == *val* ]]; then
    for beam in 1 4; do
      evaluate val best_beam$beam "$best" --beam-size $beam
      for n in 3 5 10; do
        evaluate val avg${n}_beam$beam "$run/checkpoints" --average-last $n --beam-size $beam
      done
    done
    for beam_alpha in 4:0.2 4:1.0 4:1.3 4:1.6 4:2.0 4:2.5 4:3.0 6:1.3 6:2.0; do
      beam=${beam_alpha%:*} a=${beam_alpha#*:}
      evaluate val avg${average}_beam${beam}_alpha$a "$run/checkpoints" \
        --average-last $average --beam-size $beam --alpha $a
    done
  fi
  if [[ $stages == *test* ]]; then
    for beam in 1 4; do
      evaluate test_2016_flickr best_beam$beam "$best" --beam-size $beam --alpha $alpha
      evaluate test_2016_flickr avg${average}_beam$beam "$run/checkpoints" \
        --average-last $average --beam-size $beam --alpha $alpha
    done
  fi
done

#!/usr/bin/env bash
# The race from the repository root: train each row for an hour on the same data,
# score val at 10/20/40/60 minutes, choose the decoding setting on val, score test_2016_flickr
# once per row with it, then the table, the plot and one attention image per model.
#   NMT_DATA_DIR=../shared/data bash experiments/transformer_vs_rnn/reproduce.sh [train] [val] [test] [record]
#   RACE_ROWS="transformer rnn" ... runs some rows only (default: all three).
# Nothing else should run on the CPU while a row trains: the rows race against the clock. To race
# two rows at once, one core each, start each row's training with OMP_NUM_THREADS=1 (README.md).
set -euo pipefail
data=${NMT_DATA_DIR:?point NMT_DATA_DIR at the folder holding multi30k/}/multi30k
stages=${*:-train val test record}
here=experiments/transformer_vs_rnn
race=outputs/transformer_vs_rnn
declare -A experiment=([transformer]=multi30k_de_en_small [rnn]=multi30k_de_en_rnn [rezero]=multi30k_de_en_rezero)
rows=${RACE_ROWS:-transformer rnn rezero}

evaluate() {  # <row> <split> <name> <checkpoint arguments and search options...>
  local row=$1 split=$2 name=$3
  shift 3
  nmt-evaluate "$@" --src "$data/$split.de.gz" --ref "$data/$split.en.gz" \
    --output-dir "$race/$row/evaluation/$split/$name" | grep '^[A-Za-z0-9-]*: ' | sed "s|^|$row $split $name |"
}

best_on_val() {  # <row>: the val setting with the highest BLEU, e.g. avg5_beam4_alpha1.0
  python - "$race/$1/evaluation/val" <<'EOF'
import json, sys
from pathlib import Path
reports = Path(sys.argv[1]).glob("*_beam*/report.json")
print(max(reports, key=lambda p: json.loads(p.read_text())["BLEU"]["score"]).parent.name)
EOF
}

for row in $rows; do
  run=$race/$row
  if [[ $stages == *train* ]]; then
    # A checkpoint every 2 minutes, so that one falls within 2 minutes before each mark.
    python train.py experiment=${experiment[$row]} hydra.run.dir=$run \
      callbacks.checkpoints.every_minutes=2
  fi
  if [[ $stages == *val* ]]; then
    for minutes in 10 20 40 60; do  # greedy, as training validates
      checkpoint=$(python -m experiments.transformer_vs_rnn.race checkpoint "$run" $minutes)
      if [[ -n $checkpoint ]]; then
        evaluate $row val minute$minutes "$checkpoint" --beam-size 1
      fi
    done
    # The same candidate settings for every row: the best checkpoint or the last 5 averaged,
    # greedy, or beam 4 with the length penalty's alpha 0.6 (the paper's) or 1.0 (greedy has
    # one hypothesis, which alpha cannot rerank).
    best=$(ls "$run"/checkpoints/step*-bleu*.ckpt)
    for setting in 1:0.6 4:0.6 4:1.0; do
      beam=${setting%:*}
      alpha=${setting#*:}
      evaluate $row val best_beam${beam}_alpha$alpha "$best" --beam-size $beam --alpha $alpha
      evaluate $row val avg5_beam${beam}_alpha$alpha "$run/checkpoints" --average-last 5 \
        --beam-size $beam --alpha $alpha
    done
  fi
  if [[ $stages == *test* ]]; then
    chosen=$(best_on_val $row)  # e.g. avg5_beam4_alpha1.0
    if [[ $chosen == best_* ]]; then
      checkpoints=$(ls "$run"/checkpoints/step*-bleu*.ckpt)
    else
      checkpoints="$run/checkpoints --average-last 5"
    fi
    beam=${chosen#*_beam}
    beam=${beam%%_*}
    # shellcheck disable=SC2086  # $checkpoints is a path or a path and its option
    evaluate $row test_2016_flickr $chosen $checkpoints --beam-size $beam --alpha ${chosen##*alpha}
  fi
done

if [[ $stages == *record* ]]; then
  python -m experiments.transformer_vs_rnn.race table $race | tee $here/table.md
  python -m experiments.transformer_vs_rnn.race plot $here/val_bleu.png $race
  sentence=$(zcat "$data/val.de.gz" | sed -n 1p)  # the same sentence for every model (sed reads
  # to the end: head would stop zcat with SIGPIPE, which pipefail turns into a failure)
  for row in $rows; do
    checkpoint=$race/$row/checkpoints/last.ckpt
    layer=$(python -m experiments.transformer_vs_rnn.race attention-layer "$checkpoint")
    nmt-plot-attention "$checkpoint" "$sentence" --layers $layer --out "$race/$row/attention_record"
    cp "$race/$row/attention_record/decoder_src_layer$layer.png" "$here/attention_$row.png"
  done
fi

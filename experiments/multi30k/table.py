"""The record's tables from the reports `reproduce.sh` wrote: python table.py [outputs]"""

import json
import sys
from pathlib import Path


def main(outputs: str = "outputs") -> None:
    for split in ("val", "test_2016_flickr"):
        print(f"\n{split}\n\n| direction | setting | BLEU | BLEU-lc | chrF2 | BP |")
        print("|---|---|---|---|---|---|")
        reports = Path(outputs).glob(f"multi30k_*/final/evaluation/{split}/*/report.json")
        for report_path in sorted(reports):
            report = json.loads(report_path.read_text())
            direction = report_path.parents[4].name.removeprefix("multi30k_").replace("_", "→")
            bp = report["BLEU"]["result"].split("BP = ")[1].split()[0]
            print(
                f"| {direction} | {report_path.parent.name} | {report['BLEU']['score']:.2f} | "
                f"{report['BLEU-lc']['score']:.2f} | {report['chrF2']['score']:.2f} | {bp} |"
            )


if __name__ == "__main__":
    main(*sys.argv[1:])

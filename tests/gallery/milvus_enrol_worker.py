"""A separate process that enrols into a Milvus gallery and is killed midway, for the crash test.

Usage: python milvus_enrol_worker.py LOCATION PREFIX ITEMS ROWS_PER_WRITE STOP
Prints "wrote" after each write of items to Milvus and waits after the STOP-th (0: never)
to be killed there; prints "committed <n>" when the enrolment committed.  milvus-lite opens a file in
one process at a time, so the test's own process opens the gallery only after this one.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from gallery_helpers import clustered, make_card, metas

from reid.gallery import open_gallery


def main() -> None:
    location, prefix, items, rows, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    with open_gallery(location, make_card()) as gallery:
        gallery.write_rows = rows
        call, writes = gallery.call, 0

        def slow_writes(method: str, *args: Any, **kwargs: Any) -> Any:
            nonlocal writes
            answer = call(method, *args, **kwargs)
            if method == "upsert" and args[0] == gallery.where.collection:
                writes += 1
                print("wrote", flush=True)
                if writes == stop:
                    time.sleep(60)
            return answer

        gallery.call = slow_writes
        vectors, labels, _ = clustered(items // 4, 4, seed=len(prefix))
        result = gallery.add(vectors, metas([f"{prefix}-{label}" for label in labels], prefix))
        print("committed", len(result.ids), flush=True)


if __name__ == "__main__":
    main()

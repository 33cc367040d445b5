"""GAE's async-walk twin built for sm_90 by the Triton at hand (``tests/sm90_build.py``), 64 x 64 on four
warps, two to six stages, without and with its optional inputs: the PTX's barriers and copies and
``ptxas -v``'s registers and spills, one line each (thirty-seventh session: which depths ran fast).

  PYTHONPATH=.:tests python docs/bench/async_walks/builds.py
"""
import re

import sm90_build

from kernels import LaunchConfig

for stages in (2, 3, 4, 5, 6):
    for options in (False, True):
        build = sm90_build.build("gae", LaunchConfig(64, 64, 4, num_stages=stages, latest_first=True, async_walk=True),
                                 options)
        report = " ".join(line.strip() for line in (build["ptxas"] or "").splitlines()
                          if "registers" in line or "spill" in line)
        print(f"stages {stages} options {options}: barriers {build['barriers']}, copies "
              f"{len(re.findall(r'cp[.]async[.]c[ag]', build['ptx']))}, waits {build['ptx'].count('cp.async.wait_group')}"
              f" | {report}", flush=True)

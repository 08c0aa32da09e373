"""Make a measurement table like a lab's: 6 repeated load-unload series of a slightly
non-linear spring (truth: StiffeningSpring with k = 120 N/um, r = 0.8, c = 1.5e-7 um/N^2),
read by both probes with sigma = 0.05 um, the applied force scattering 2 N around its setpoint.

Writes spring.csv (greylab's long format: series, step, force_setpoint_N, force_N, sensor,
displacement_um) and spring.sensors.csv (sensor, sigma_um) next to this file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from spring import StiffeningSpring

TRUTH = np.array([120.0, 0.8, 1.5e-7])
SIGMA = {"tip": 0.05, "lever": 0.05}


def main(folder: Path = Path(__file__).parent, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    model = StiffeningSpring()
    setpoints = model.default_forces
    rows = []
    for series in range(6):
        forces = np.clip(setpoints + rng.normal(0.0, 2.0, setpoints.size), 0.0, None)
        reading = model.response(TRUTH, forces)  # (steps, sensors)
        for step, force in enumerate(forces):
            for k, sensor in enumerate(model.sensors):
                noise = rng.normal(0.0, SIGMA[sensor])
                rows.append({"series": series, "step": step,
                             "force_setpoint_N": setpoints[step], "force_N": force,
                             "sensor": sensor, "displacement_um": reading[step, k] + noise})  # fmt: skip
    pd.DataFrame(rows).to_csv(folder / "spring.csv", index=False)
    pd.DataFrame({"sensor": list(SIGMA), "sigma_um": list(SIGMA.values())}).to_csv(
        folder / "spring.sensors.csv", index=False
    )
    print(f"wrote {len(rows)} rows to {folder / 'spring.csv'} and the sensor sheet")


if __name__ == "__main__":
    main()

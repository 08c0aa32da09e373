"""Sensor design of the press (docs/methods.md section 1.4).

``sensors`` the public ``sensor_design`` (criteria, enumeration), ``search`` the candidate
search that chooses enumeration or branch-and-bound, ``bnb`` branch-and-bound on the first-order
design with its relaxations (``bnb_relax``) and incumbents (``bnb_greedy``). No re-exports.
"""

"""Weighted least squares of the press (docs/methods.md section 1.2-1.3).

``lm`` the careful Levenberg-Marquardt and its convergence test, ``minpack`` MINPACK's
``lmder`` and Newton steps as the single fit's first engine (judged by that test), ``problem``
the one problem object every solver takes (``LSProblem``), ``core`` the compiled residual core
and the single fit (``solve_ls``), ``evaluation`` the single fit's model evaluations, ``linalg``
numpy's LAPACK calls without ``np.linalg``'s per-call checks, ``batch`` many fits of one model
at once, ``covariance`` Bard's C and C1, ``estimation`` the public ``fit_parameters``. No
re-exports: import the module you need.
"""

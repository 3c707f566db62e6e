"""The order `make test` hands test modules to its workers (conftest.py sorts by it)."""

# The modules that take half a minute or more on 2 cores, longest first: `make test`'s workers
# get whole modules in collection order (pytest-xdist's loadfile with --no-loadscope-reorder),
# so these start first and the short ones fill in after: both workers end together instead of
# one waiting on a long module handed out last.
LONGEST_FIRST = (
    "tests/test_backends.py",
    "tests/test_multiprocess_train.py",  # its trainings: two processes each
    "tests/test_train.py",
    "tests/test_export.py",
    "tests/test_ship.py",
    "tests/test_verify.py",
    "tests/test_paper_cifar.py",
    "tests/test_bench.py",
    "tests/test_ship_browser.py",
    "studies/tests/test_gpu_rows.py",
    "tests/test_int8_search.py",
    "tests/test_recipe.py",
    "tests/test_readme.py",
    "tests/test_verify_layers.py",
    "tests/test_export_faults.py",
    "tests/test_runtimes.py",
    "tests/test_web_bench_verify.py",
    # the quick part's longest (20-30 s each)
    "tests/test_models.py",
    "studies/tests/test_step_profile.py",
    "tests/test_layering.py",
)

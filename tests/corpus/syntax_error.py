def f(:
    legacy_load_mm_data(x)

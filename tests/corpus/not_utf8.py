x = 'café'
legacy_load_mm_data(x)

// Intentionally empty: rf_check_layer links a layer's whole archive into a shared library, and
// CMake needs one source file to make that library from.

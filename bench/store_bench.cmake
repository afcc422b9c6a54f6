# The history store's size and insert benchmark (include()d from bench/CMakeLists.txt).
add_executable(store_bench ${CMAKE_CURRENT_LIST_DIR}/store_bench.cc)
target_link_libraries(store_bench PRIVATE gd_store SQLite::SQLite3)

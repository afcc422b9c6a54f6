# Writes OUTPUT, a C++ file defining `extern const char SYMBOL[]` with the
# bytes of INPUT, so a data file is compiled into the binary.
#   cmake -DINPUT=in.toml -DOUTPUT=out.cc -DSYMBOL=kName -P embed_text.cmake
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by embed_text.cmake; do not edit.\n"
  "namespace gpudoctor {\n"
  "extern const char ${SYMBOL}[] = {${bytes} '\\0'};\n"
  "}  // namespace gpudoctor\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")

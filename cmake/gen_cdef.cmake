# Extract the cdef regions of the public headers into one C string (embedded
# in the tunelua host as package.preload["tunelua.cdef"]) and a Lua file (for
# using the library from a plain luajit). HEADERS is a ;-list: core/tunelua.h
# first, then its parts core/tunelua_*.h in name order; each part's region
# may use the types of core/tunelua.h.
set(all "")
foreach(h ${HEADERS})
  file(READ ${h} text)
  string(FIND "${text}" "/* cdef:begin */" b)
  string(FIND "${text}" "/* cdef:end */" e)
  if(b LESS 0 OR e LESS 0)
    message(FATAL_ERROR "gen_cdef: ${h} lacks the cdef:begin/cdef:end markers")
  endif()
  string(LENGTH "/* cdef:begin */" blen)
  math(EXPR start "${b} + ${blen}")
  math(EXPR len "${e} - ${start}")
  string(SUBSTRING "${text}" ${start} ${len} region)
  get_filename_component(hname ${h} NAME)
  string(APPEND all "\n/* ---- ${hname} ---- */\n${region}")
endforeach()
# Escape for a C string literal, line by line.
string(REPLACE "\\" "\\\\" esc "${all}")
string(REPLACE "\"" "\\\"" esc "${esc}")
string(REPLACE "\n" "\\n\"\n\"" esc "${esc}")
file(WRITE ${OUT_C}.tmp "/* generated from the public headers by cmake/gen_cdef.cmake */\nconst char tl_cdef_text[] =\n\"${esc}\";\n")
file(WRITE ${OUT_LUA}.tmp "-- generated from the public headers by cmake/gen_cdef.cmake\nreturn [==[${all}]==]\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT_C}.tmp ${OUT_C})
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT_LUA}.tmp ${OUT_LUA})
file(REMOVE ${OUT_C}.tmp ${OUT_LUA}.tmp)

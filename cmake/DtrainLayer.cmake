# dtrain_layer(NAME DEPS ...): a static library from every src/NAME/*.cc (main.cc excluded),
# an INTERFACE library while the folder has no sources yet. Headers are included as
# "NAME/file.h". Each layer exports only its own folder: the include root it publishes,
# build/layer_include/NAME, holds one link, NAME -> src/NAME. A layer therefore sees its own
# headers and those of the layers it links (transitively), and a wrong-way include fails to
# compile. scripts/check_layers.py checks the same graph against the includes.
function(dtrain_layer name)
  cmake_parse_arguments(L "" "" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cc)
  list(FILTER srcs EXCLUDE REGEX "/main\\.cc$")
  set(root ${CMAKE_BINARY_DIR}/layer_include/${name})
  file(MAKE_DIRECTORY ${root})
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${name} ${root}/${name} SYMBOLIC)
  if(srcs)
    add_library(dtrain_${name} STATIC ${srcs})
    target_include_directories(dtrain_${name} PUBLIC ${root})
    target_link_libraries(dtrain_${name} PUBLIC ${L_DEPS})
  else()
    add_library(dtrain_${name} INTERFACE)
    target_include_directories(dtrain_${name} INTERFACE ${root})
    target_link_libraries(dtrain_${name} INTERFACE ${L_DEPS})
  endif()
endfunction()

# dtrain_tests(LAYER LIBS ...): one executable per tests/LAYER/*_test.cc, each case a CTest test
# labelled with the layer. A file named *_mp_test.cc starts processes (label "multiprocess"),
# *_slow_test.cc is slow (label "slow"). Every program gets DTRAIN_BIN, DTRAIN_TEST_RANK and
# DTRAIN_DATA_DIR in its environment (tests/support/test_env.cc).
function(dtrain_tests layer)
  cmake_parse_arguments(T "" "" "LIBS" ${ARGN})
  file(GLOB tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${layer}/*_test.cc)
  foreach(src ${tests})
    get_filename_component(exe ${src} NAME_WE)
    add_executable(${exe} ${src})
    target_link_libraries(${exe} PRIVATE ${T_LIBS} dtrain_test_support GTest::gtest GTest::gmock)
    set_target_properties(${exe} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
    # One label per test (a CMake list would be split by gtest_discover_tests); ctest -L takes
    # a regex, so "coll_slow" is selected by -L coll and by -L slow alike.
    set(labels ${layer})
    if(exe MATCHES "_mp_test$")
      set(labels ${layer}_multiprocess)
    elseif(exe MATCHES "_slow_test$")
      set(labels ${layer}_slow)
    endif()
    target_sources(${exe} PRIVATE $<TARGET_OBJECTS:dtrain_test_env>)
    gtest_discover_tests(${exe}
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
      PROPERTIES LABELS "${labels}" TIMEOUT 300
      DISCOVERY_TIMEOUT 60)
  endforeach()
endfunction()

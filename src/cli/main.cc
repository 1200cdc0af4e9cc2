#include "cli/commands.h"

int main(int argc, char** argv) { return dtrain::cli::main(argc, argv); }

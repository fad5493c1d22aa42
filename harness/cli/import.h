/*
 * import.h: `ampscope import SCRIPT.py [--out DIR] [--name NAME] [--params DTYPE]`: runs the
 * importer (tools/import_model.py, beside the binary's folder) with the Python interpreter
 * that AMPSCOPE_PYTHON names, else python3. The importer exports the script's model with
 * torch.export and writes DIR/NAME.case and the .npy files it reads (docs/CASES.md, "A
 * PyTorch model as a case").
 */
#ifndef AMPSCOPE_CLI_IMPORT_H
#define AMPSCOPE_CLI_IMPORT_H

/* argv as main received it (argv[1] is "import"); returns only on failure: 2 */
int import_exec(int argc, char **argv);

#endif

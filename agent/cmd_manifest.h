/* `nanolet manifest check [--hostname-override NAME] FILE...` */
#ifndef NL_CMD_MANIFEST_H
#define NL_CMD_MANIFEST_H

/* argv[0] is "manifest", argv[1] the verb ("check"); --flag value and
 * --flag=value both work, anywhere after the verb. Prints each file's decoded,
 * defaulted static pod as JSON on stdout, or its field-path errors on stderr.
 * Returns 0 when every file is good, 1 when any is bad, 2 on usage errors;
 * --help prints the usage on stdout and returns 0. */
int nl_cmd_manifest(int argc, char **argv);

#endif

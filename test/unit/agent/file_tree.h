/* Fixture file trees for the stats tests (a cgroup hierarchy in /tmp). */
#ifndef NL_TEST_FILE_TREE_H
#define NL_TEST_FILE_TREE_H

/* Writes text to root/rel, making its directories. */
void put_file(const char *root, const char *rel, const char *text);
/* Removes the tree and frees root. */
void rm_tree(char *root);

#endif

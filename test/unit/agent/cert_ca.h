/* A throwaway CA for the certificate tests: signs a PEM CSR (or makes a pair)
 * with the validity asked for, as kube-controller-manager's signer would. */
#ifndef TEST_AGENT_CERT_CA_H
#define TEST_AGENT_CERT_CA_H

#include <time.h>

/* Returns the PEM certificate for csr_pem valid from..to (caller frees). */
char *test_ca_sign(const char *csr_pem, time_t from, time_t to);
/* A new key (*key_pem) and its certificate for cn, valid from..to. */
char *test_ca_pair(const char *cn, time_t from, time_t to, char **key_pem);

#endif

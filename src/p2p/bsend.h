/*
 * Buffered sends in ftwrap's own attached buffer.
 *
 * The MPI's buffered sends wait inside MPI_Buffer_detach (and MPI_Finalize)
 * until every buffered message has gone, and neither MPI can give one up:
 * a message buffered for a process that then died kept the detach waiting
 * for good.  So ftwrap keeps the attached buffer itself: a buffered send
 * packs the message into it and sends the copy as an ordinary ftwrap
 * nonblocking send (watched, through the rendezvous when large); the
 * detach waits for those sends, and one whose peer failed ends in error
 * instead of holding it.
 */
#ifndef FTW_P2P_BSEND_H
#define FTW_P2P_BSEND_H

#include <mpi.h>

int ftw_buffer_attach(void *buf, MPI_Count size, const char *name);
/* *(void **)addr_p: the buffer; *size_p its size (NULL, 0 if none). */
int ftw_buffer_detach(void *addr_p, MPI_Count *size_p, const char *name);

/* MPI_Bsend (request NULL) and MPI_Ibsend (request: a request that is
 * complete at once, the message being buffered). */
int ftw_bsend(const void *buf, MPI_Count count, MPI_Datatype dt, int dest,
              int tag, MPI_Comm comm, const char *name, MPI_Request *request);

/* MPI_Bsend_init: a persistent request each start of which is a buffered
 * send of these arguments (ftw_bsend_started). */
int ftw_bsend_init(const void *buf, MPI_Count count, MPI_Datatype dt,
                   int dest, int tag, MPI_Comm comm, const char *name,
                   MPI_Request *request);

/* MPI_Start/MPI_Startall: the buffered sends among reqs[0..n) buffer
 * their message now; MPI_SUCCESS or the first error. */
int ftw_bsend_started(int n, const MPI_Request reqs[], const char *name);

/* MPI_Request_free of a request ftw_bsend_init made: forget it. */
void ftw_bsend_forget(MPI_Request req);

/* MPI_Finalize: wait for the buffered sends still going (the implicit
 * detach), a failed peer's ending in error. */
void ftw_bsend_fini(void);

#endif

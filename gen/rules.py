"""The rule table of the ftwrap wrapper generator.

Every MPI_ / MPIX_ function declared by the installed mpi.h must match
exactly one rule here, or the build stops naming it.  A rule says which
family a function belongs to; the family picks the code template in
ftwgen.py (and, as the library grows, the core function in src/ that the
wrapper calls).  Argument roles (communicator, request, buffer, rank, tag)
are read off the prototype by ftwgen.py; a rule only adds what the
prototype cannot say: whether the call is collective, creates a
communicator, or may block.

Patterns are anchored regular expressions over the C name.  The large-count
("_c") forms share the rule of their base function.
"""

# Attributes a rule can carry.
BLOCKS = "blocks"            # may wait for another process
COLLECTIVE = "collective"    # every process of the communicator calls it
CREATES_COMM = "creates_comm"  # returns a new communicator
FREES_COMM = "frees_comm"    # releases a communicator handle
NONBLOCKING = "nonblocking"  # starts a request
PERSISTENT = "persistent"    # creates an inactive persistent request
AGREE = "agree"              # creation: agree over the parent's members
ANY_RANKS = "any_ranks"      # creation that does not depend on the
                             # parent's rank numbers (may run on the
                             # survivors after failures were excluded)
NB_ADJUST = "nb_adjust"      # blocking collective the wrapper posts through
                             # ftw_coll_i<name>() in src/ (same arguments
                             # as the native nonblocking call, with the
                             # ftw_coll_t first and no communicator), which
                             # adjusts what the MPI's nonblocking form would
                             # do differently from its blocking one
WATCHED_DUP = "watched_dup"  # creation the wrapper runs as
                             # ftw_create_dup() in src/ (the MPI's
                             # nonblocking duplicate, abandoned when a member
                             # fails), with the info argument or
                             # MPI_INFO_NULL
WATCHED_SPLIT = "watched_split"  # MPI_Comm_split, which the wrapper runs as
                             # ftw_create_split() in src/ (a watched
                             # gather of colors and keys, then the MPI's
                             # MPI_Comm_create_group per color)
SPLIT_END = "split_end"      # the _end of a split collective (its _begin
                             # did the collective's checks)
TESTALL_UNSAFE = "testall_unsafe"  # a passthrough that first marks
                             # the process as holding requests MPICH's
                             # MPI_Testall cannot complete reliably
                             # (ftw_req_mark_testall_unsafe)
CORE = "core"                # the wrapper calls ftw_<name>() in src/ with
                             # the same arguments (same signature on every
                             # MPI, no large-count twin); <name> is the
                             # call's without MPI_ or MPIX_, in lower case

_LC = r"(_c)?"  # optional large-count suffix

_COLL = (r"(Barrier|Bcast|Reduce|Allreduce|Scan|Exscan|Gather|Gatherv|"
         r"Scatter|Scatterv|Allgather|Allgatherv|Alltoall|Alltoallv|"
         r"Alltoallw|Reduce_scatter|Reduce_scatter_block|"
         r"Neighbor_allgather|Neighbor_allgatherv|Neighbor_alltoall|"
         r"Neighbor_alltoallv|Neighbor_alltoallw)")

# (pattern, family, attributes).  First match wins; order from specific to
# general.
RULES = [
    # Process lifetime.
    (r"MPI_(Init|Init_thread)", "init", {BLOCKS, COLLECTIVE}),
    (r"MPI_Finalize", "finalize", {BLOCKS, COLLECTIVE}),
    (r"MPI_Finalized", "local", {CORE}),
    (r"MPI_Error_class", "local", {CORE}),
    (r"MPI_Error_string", "local", {CORE}),
    (r"MPI_Comm_get_attr", "local", {CORE}),     # MPIX_FT (mpi-ext.h)
    (r"MPI_Abort", "local", {CORE}),
    (r"MPI_Type_free", "local", {CORE}),
    (r"MPI_(Initialized|Query_thread|Is_thread_main)", "local", set()),

    # Point-to-point.
    (r"MPI_(Send|Ssend|Rsend|Bsend)" + _LC, "send", {BLOCKS}),
    (r"MPI_(Isend|Issend|Irsend|Ibsend)" + _LC, "send", {NONBLOCKING}),
    (r"MPI_(Send|Ssend|Rsend|Bsend)_init" + _LC, "send", {PERSISTENT}),
    (r"MPI_Recv" + _LC, "recv", {BLOCKS}),
    (r"MPI_Irecv" + _LC, "recv", {NONBLOCKING}),
    (r"MPI_Recv_init" + _LC, "recv", {PERSISTENT}),
    (r"MPI_Mrecv" + _LC, "recv", {BLOCKS}),
    (r"MPI_Imrecv" + _LC, "recv", {NONBLOCKING}),
    (r"MPI_(Probe|Mprobe)", "probe", {BLOCKS, CORE}),
    (r"MPI_(Iprobe|Improbe)", "probe", {CORE}),
    (r"MPI_(Sendrecv|Sendrecv_replace)" + _LC, "sendrecv", {BLOCKS}),
    (r"MPI_(Isendrecv|Isendrecv_replace)" + _LC, "sendrecv", {NONBLOCKING}),
    (r"MPI_(Psend_init|Precv_init)", "partitioned", {PERSISTENT}),
    (r"MPI_(Pready|Pready_range|Pready_list|Parrived)", "partitioned", set()),

    # Request completion and management.
    (r"MPI_(Wait|Waitall|Waitany|Waitsome)", "wait", {BLOCKS, CORE}),
    (r"MPI_(Test|Testall|Testany|Testsome)", "wait", {CORE}),
    (r"MPI_(Start|Startall)", "start", {CORE}),
    (r"MPI_Request_free", "request", {CORE}),
    (r"MPI_Request_get_status", "request", {CORE}),
    (r"MPI_Cancel", "request", {CORE}),
    (r"MPI_Test_cancelled", "request", set()),
    (r"MPIX?_(Grequest_start|Grequest_class_allocate)", "request",
     {TESTALL_UNSAFE}),
    (r"MPIX?_(Grequest_complete|Grequest_class_create)", "request", set()),

    # Collectives: blocking, nonblocking, persistent (MPI-4 and Open MPI's
    # MPIX_ extension of the same).
    # Open MPI 4.1's nonblocking forms of these pair the blocks of
    # duplicate Cartesian neighbours differently from the blocking ones
    # (src/coll/coll_nb.c); the blocking wrappers adjust the arguments.
    (r"MPI_(Neighbor_alltoall|Neighbor_alltoallv|Neighbor_alltoallw)",
     "coll", {BLOCKS, COLLECTIVE, NB_ADJUST}),
    (r"MPI_" + _COLL + _LC, "coll", {BLOCKS, COLLECTIVE}),
    (r"MPI_I" + _COLL.lower() + _LC, "coll", {COLLECTIVE, NONBLOCKING}),
    (r"MPIX?_" + _COLL + "_init" + _LC, "coll", {COLLECTIVE, PERSISTENT}),

    # Communicator creation and release.
    (r"MPI_Comm_split", "comm_create",
     {BLOCKS, COLLECTIVE, CREATES_COMM, AGREE, ANY_RANKS, WATCHED_SPLIT}),
    (r"MPI_(Comm_split_type|Comm_create)", "comm_create",
     {BLOCKS, COLLECTIVE, CREATES_COMM, AGREE, ANY_RANKS}),
    (r"MPI_Comm_create_group", "comm_create",
     {BLOCKS, COLLECTIVE, CREATES_COMM, ANY_RANKS}),
    (r"MPI_(Comm_dup|Comm_dup_with_info)", "comm_create",
     {BLOCKS, COLLECTIVE, CREATES_COMM, AGREE, WATCHED_DUP}),
    (r"MPI_(Cart_create|Cart_sub|Graph_create|"
     r"Dist_graph_create|Dist_graph_create_adjacent)", "comm_create",
     {BLOCKS, COLLECTIVE, CREATES_COMM, AGREE}),
    # Their result numbers its processes afresh: after a validate that
    # excluded processes, it holds the survivors.
    (r"MPI_(Intercomm_create|Intercomm_merge)", "comm_create",
     {BLOCKS, COLLECTIVE, CREATES_COMM, AGREE, ANY_RANKS}),
    (r"MPI_(Comm_accept|Comm_connect|Comm_spawn|Comm_spawn_multiple|"
     r"Comm_join|Comm_create_from_group|Intercomm_create_from_groups)",
     "comm_create", {BLOCKS, COLLECTIVE, CREATES_COMM}),
    (r"MPI_(Comm_idup|Comm_idup_with_info)", "comm_create",
     {COLLECTIVE, CREATES_COMM, NONBLOCKING}),
    (r"MPI_(Comm_free|Comm_disconnect)", "comm_free", {FREES_COMM}),

    # Error handling.
    (r"MPI_(Comm|Win|File)_create_errhandler", "errhandler", {CORE}),
    (r"MPI_(Comm_set_errhandler|Comm_get_errhandler|Comm_call_errhandler|"
     r"Errhandler_free)", "errhandler", set()),

    # ULFM: ftwrap's own (src/core/revoke.c, src/ulfm/ulfm.c), never the MPI's.  The
    # calls an mpi.h does not declare (all of them on Open MPI 4.1; is_revoked,
    # ishrink, iagree, ack_failed, get_failed on MPICH 4.0) are written by
    # hand in src/ and declared in include/mpi-ext.h.
    (r"MPIX_Comm_revoke", "ulfm", {CORE}),
    (r"MPIX_Comm_(shrink|agree)", "ulfm", {BLOCKS, COLLECTIVE, CORE}),
    (r"MPIX_Comm_(failure_ack|failure_get_acked)", "ulfm", {CORE}),

    # Windows (src/winfile/win.c): creation passes the gate and is tracked;
    # the synchronisations and the free are ftwrap's own; RMA calls are
    # refused on a window a failure invalidated and routed to the window
    # a validate made over the survivors.
    (r"MPI_Win_(create|allocate|allocate_shared|create_dynamic)" + _LC,
     "win_life", {BLOCKS, COLLECTIVE}),
    (r"MPI_Win_(fence|start|complete|post|wait|test|lock|unlock|lock_all|"
     r"unlock_all|flush|flush_all|flush_local|flush_local_all|sync|free)",
     "win_sync", {CORE}),
    (r"MPI_(Put|Rput|Get|Rget|Accumulate|Raccumulate|Get_accumulate|"
     r"Rget_accumulate|Fetch_and_op|Compare_and_swap)" + _LC, "win_rma",
     set()),

    # Files (src/winfile/file.c): opening passes the gate and is tracked;
    # collective operations wait in a watched barrier first and are refused
    # after a failure until FTW_File_validate; every call runs on the
    # handle a validate opened over the survivors.
    (r"MPI_File_open", "file_open", {BLOCKS, COLLECTIVE}),
    (r"MPI_File_(close|set_view)", "file_core", {CORE}),
    (r"MPI_File_(read_all|write_all|read_at_all|write_at_all|read_ordered|"
     r"write_ordered|read_all_begin|write_all_begin|read_at_all_begin|"
     r"write_at_all_begin|read_ordered_begin|write_ordered_begin|iread_all|"
     r"iwrite_all|iread_at_all|iwrite_at_all|sync|set_size|preallocate|"
     r"set_atomicity|seek_shared|set_info)" + _LC, "file_coll", set()),
    (r"MPI_File_(read_all_end|write_all_end|read_at_all_end|"
     r"write_at_all_end|read_ordered_end|write_ordered_end)", "file_coll",
     {SPLIT_END}),
    (r"MPI_File_(read|write|read_at|write_at|read_shared|write_shared|iread|"
     r"iwrite|iread_at|iwrite_at|iread_shared|iwrite_shared|seek|"
     r"get_position|get_position_shared|get_byte_offset|get_size|get_amode|"
     r"get_atomicity|get_group|get_info|get_view|get_type_extent)" + _LC,
     "file_local", set()),

    # The attached buffer of buffered sends, which ftwrap keeps itself
    # (src/p2p/bsend.c).
    (r"MPI_Buffer_(attach|detach)" + _LC, "buffer", set()),

    # Local calls with no failure semantics: checked passthrough.  Whole
    # object families by prefix (datatypes, groups, info, files, windows,
    # the tools interface, sessions) ...
    (r"MPI_(Type|Pack|Unpack|Info|Group|Op|Error|Add_error|Attr|Keyval|"
     r"Buffer|Cart|Graph|Status|Aint|Errhandler|Message|Win|File|T|"
     r"Session)_\w+", "local", set()),
    # ... and single calls by name.
    (r"MPI_(Pack|Unpack|Get_address|Get_count|Get_elements|Get_elements_x|"
     r"Get_library_version|Get_processor_name|Get_version|Reduce_local|"
     r"Comm_(rank|size|remote_size|remote_group|group|compare|test_inter|"
     r"set_name|get_name|set_info|get_info|set_attr|get_attr|delete_attr|"
     r"create_keyval|free_keyval|c2f|f2c|get_parent)|"
     r"Request_c2f|Request_f2c|Alloc_mem|Free_mem|Dims_create|Cartdim_get|"
     r"Graphdims_get|Dist_graph_neighbors|Dist_graph_neighbors_count|"
     r"Topo_test|Address|Register_datarep|Open_port|Close_port|"
     r"Publish_name|Unpublish_name|Lookup_name|Pcontrol|Wtime|Wtick|"
     r"Group_from_session_pset)"
     + _LC, "local", set()),
    (r"MPIX_(Delete_error_class|Delete_error_code|Delete_error_string|"
     r"GPU_query_support|Query_cuda_support|Query_hip_support|"
     r"Query_ze_support)", "local", set()),
]

# Functions an MPI declares without a PMPI_ entry point, so ftwrap cannot
# forward them, with the reason.  On an MPI that has the PMPI_ form they are
# wrapped like any other.
# The generator skips them; tests/gen_coverage.sh accepts them.
EXCLUDED = {
    "MPIX_Query_cuda_support":
        "Open MPI declares no PMPIX_ entry point to forward to",
}

# Symbols a libmpi exports under an MPI_ name that are not MPI calls, or
# that its mpi.h does not declare, with the reason ftwrap leaves them alone.
NOT_CALLS = {
    r"MPI_F_STATUSES?_IGNORE|MPI_F08_STATUSES?_IGNORE|MPI_UNWEIGHTED|"
    r"MPI_WEIGHTS_EMPTY|MPI_T_PVAR_ALL_HANDLES":
        "a predefined constant (data symbol), not a function",
    r"MPI_(COMM|TYPE|WIN)_(DUP|NULL_COPY|NULL_DELETE)_FN|MPI_(NULL_COPY|"
    r"NULL_DELETE|DUP)_FN|MPI_CONVERSION_FN_NULL":
        "a predefined callback the MPI calls through a pointer",
    r"MPI_(AINT_ADD|AINT_DIFF|WTICK|WTIME)_F90":
        "Fortran binding",
    r"MPI_(Address|Errhandler_create|Errhandler_get|Errhandler_set|"
    r"Type_extent|Type_hindexed|Type_hvector|Type_lb|Type_struct|Type_ub)":
        "removed in MPI-3.0; Open MPI's mpi.h no longer declares it",
}
